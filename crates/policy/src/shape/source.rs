//! The shape of a `sources:` entry: the database or bull-board a source link asks.

use super::kinds::{MILLISECONDS, TEXT, opt, req};
use super::{Shape, Value};

const LOOKUP_TIMEOUT_DOC: &str = "How long one lookup may take, connecting included; default `2s`.";
const BATCH_SIZE_DOC: &str = "How many keys one lookup asks about; default 1,000, at most 100,000.";

pub(super) const SOURCE: Shape = Shape::OneOf(&[
    opt(
        "postgres",
        Shape::Fields(&[
            req("url", TEXT, "`postgres://` or `postgresql://`."),
            req(
                "query",
                TEXT,
                "Takes the keys as a text array (`$1`) and returns a `key` column, an optional boolean `matching` and an optional `changed_at`.",
            ),
            opt("timeout", MILLISECONDS, LOOKUP_TIMEOUT_DOC),
            opt("batchSize", Shape::Value(Value::Count(1)), BATCH_SIZE_DOC),
        ]),
        "Records in PostgreSQL.",
    ),
    opt(
        "redis",
        Shape::Fields(&[
            opt(
                "url",
                TEXT,
                "`redis://` or `rediss://`; absent = the governed Redis.",
            ),
            req(
                "key",
                TEXT,
                "A key template with one placeholder: `cart:{key}`, or a path such as `order:{data.orderId}`.",
            ),
            opt(
                "field",
                TEXT,
                "A hash field; with `equals`, the record matches while it holds that value.",
            ),
            opt(
                "equals",
                TEXT,
                "The value `field` holds while the record matches.",
            ),
            opt("timeout", MILLISECONDS, LOOKUP_TIMEOUT_DOC),
            opt("batchSize", Shape::Value(Value::Count(1)), BATCH_SIZE_DOC),
        ]),
        "Records in Redis.",
    ),
]);
