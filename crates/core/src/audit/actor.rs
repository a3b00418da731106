//! Who asked for an audited change: [`Actor`]. A person is named (a dashboard token, or
//! `--actor` and the OS user for `archive restore`); the daemon's own runs and the CLI's
//! sweeps and erasures name nobody, and their events carry no `actor`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The `actor` of an audit event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Actor {
    /// Nobody named: a scheduled or event-driven daemon run, a CLI sweep or erasure. The
    /// event has no `actor` field.
    #[default]
    Unnamed,
    /// A person, by name: the dashboard token's name, `--actor`, or the OS user.
    Named(String),
}

impl Actor {
    /// `name`, when there is one.
    pub fn named(name: Option<&str>) -> Self {
        name.map_or(Actor::Unnamed, |n| Actor::Named(n.to_string()))
    }

    /// The name, if somebody is named.
    pub fn name(&self) -> Option<&str> {
        match self {
            Actor::Unnamed => None,
            Actor::Named(name) => Some(name),
        }
    }

    /// Nobody is named: the event leaves `actor` out.
    pub fn is_unnamed(&self) -> bool {
        *self == Actor::Unnamed
    }
}

impl Serialize for Actor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.name().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Actor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<String>::deserialize(deserializer).map(|n| n.map_or(Actor::Unnamed, Actor::Named))
    }
}
