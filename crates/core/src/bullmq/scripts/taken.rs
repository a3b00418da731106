//! What a destructive call took along besides the jobs it was asked about, as its reply
//! counts them (`audit.lua`'s `takenReply`): flow parents removed or released and children
//! removed with their parents, by the queue and state each was taken from and its role.

use super::reply::Field;
use redis::RedisResult;

/// Why a job was taken along: the role its audit event names it with (`relatedJobs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TakenRole {
    /// `parentRemoved`: a parent in the swept queue removed with its last child, as
    /// `Queue.clean` removes it.
    ParentRemoved,
    /// `parentReleased`: a parent that lost its last pending child, moved to its queue's
    /// `wait` (and not removed by the same call).
    ParentReleased,
    /// `childRemoved`: a child (at any depth) removed with its removed parent, as
    /// `Job.remove()` removes it.
    ChildRemoved,
}

impl TakenRole {
    /// Every role, in the order reports list them.
    pub const ALL: [TakenRole; 3] = [
        TakenRole::ParentRemoved,
        TakenRole::ParentReleased,
        TakenRole::ChildRemoved,
    ];

    /// The role's name, as the scripts and the audit trail write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TakenRole::ParentRemoved => "parentRemoved",
            TakenRole::ParentReleased => "parentReleased",
            TakenRole::ChildRemoved => "childRemoved",
        }
    }

    /// The role named `name`, if it is one.
    pub fn parse(name: &str) -> Option<TakenRole> {
        TakenRole::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Whether a job taken along in this role is removed (not only moved).
    pub fn removes(self) -> bool {
        self != TakenRole::ParentReleased
    }
}

/// How many jobs one call took along from one state of one queue in one role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenRow {
    /// The queue's key base (`bull:export-parts`).
    pub queue: String,
    /// The state they were taken from (`waiting-children`, `completed`, `wait`, …).
    pub state: String,
    /// Why they were taken.
    pub role: TakenRole,
    /// How many.
    pub count: u64,
}

/// What one call took along: counts by queue, state and role, and the parents it released.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// The counts.
    pub rows: Vec<TakenRow>,
    /// Full keys of the parents the call released to wait: the same run leaves them there.
    pub released: Vec<String>,
}

/// The reply field `takenAlong`: `{counts, released}`, counts flat with four values a row
/// (queue base, state, role, count), released the parents' full keys.
pub(super) fn taken_rows(field: Field) -> RedisResult<Taken> {
    let mut parts = field.fields(&["counts", "released"])?;
    let counts = parts
        .next("counts")
        .rows(&["queue", "state", "role", "count"])?;
    let released = parts.next("released").texts()?;
    let mut rows = Vec::with_capacity(counts.len());
    for mut row in counts {
        let queue = row.next("queue").text()?;
        let state = row.next("state").text()?;
        let name = row.next("role").text()?;
        let count = row.next("count").count()?;
        let Some(role) = TakenRole::parse(&name) else {
            return Err(super::reply::wrong_shape(
                "takenAlong",
                &format!("unknown role `{name}`"),
            ));
        };
        rows.push(TakenRow {
            queue,
            state,
            role,
            count,
        });
    }
    Ok(Taken { rows, released })
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::text;
    use super::*;
    use redis::Value;

    fn field(v: Value) -> Field {
        Field::whole("t", "takenAlong", v)
    }

    fn reply(counts: Vec<Value>, released: Vec<Value>) -> Value {
        Value::Array(vec![Value::Array(counts), Value::Array(released)])
    }

    #[test]
    fn rows_decode_and_an_unknown_role_or_another_shape_is_an_error() {
        let counts = vec![
            text("bull:parts"),
            text("completed"),
            text("childRemoved"),
            Value::Int(40),
        ];
        let taken = taken_rows(field(reply(counts, vec![text("bull:q:7")]))).unwrap();
        assert_eq!(
            taken.rows,
            [TakenRow {
                queue: "bull:parts".into(),
                state: "completed".into(),
                role: TakenRole::ChildRemoved,
                count: 40,
            }]
        );
        assert_eq!(taken.released, ["bull:q:7"]);
        let none = taken_rows(field(reply(vec![], vec![]))).unwrap();
        assert_eq!(none, Taken::default());
        let odd = vec![text("q"), text("s"), text("x"), Value::Int(1)];
        assert!(taken_rows(field(reply(odd, vec![]))).is_err());
        assert!(taken_rows(field(Value::Array(vec![]))).is_err());
        assert!(taken_rows(field(Value::Int(0))).is_err());
    }
}
