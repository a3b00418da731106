//! What removing pending jobs as `Job.remove()` does would take along, read only, for `plan`
//! (`lua/flow_tree.lua`).

use super::compiled::Scripts;
use super::reply::{Fields, wrong_shape};
use crate::bullmq::keys::QueueKeys;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One job as `job_remove` would find it: whether it would be removed, and its tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowTree {
    /// Why the run would leave it (`scheduler`, `elsewhere`, `outOfReach`, `locked`, `gone`);
    /// `None` when it would remove it.
    pub held: Option<String>,
    /// Its parent's full key, when it has one.
    pub parent: Option<String>,
    /// Every child it has or had that exists, at any depth, parents before their children
    /// (empty when it would be left).
    pub children: Vec<FlowChild>,
}

/// One child in a [`FlowTree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowChild {
    /// Its full key.
    pub key: String,
    /// The state it is in (`unknown` in none).
    pub state: String,
    /// The full key of the job it hangs under.
    pub under: String,
}

/// One `flow_tree` call's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowTrees {
    /// The trees of the first ids sent, as many as the call handled before its budget.
    pub trees: Vec<FlowTree>,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// What removing `ids` from the pending state at `state_key` would take along, read only
    /// (see `lua/flow_tree.lua`); `take_elsewhere` as the policy's `childrenInOtherQueues`.
    pub async fn flow_tree<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        (state_key, reach): (&str, u64),
        take_elsewhere: bool,
        ids: &[String],
        budget_us: u64,
    ) -> RedisResult<FlowTrees> {
        let mut args: Vec<String> = vec![
            keys.job_prefix(),
            reach.to_string(),
            if take_elsewhere { "1" } else { "0" }.to_string(),
            budget_us.to_string(),
        ];
        args.extend(ids.iter().cloned());
        let reply: Value = self.flow_tree.invoke(con, &[state_key], &args).await?;
        FlowTrees::decode(reply)
    }
}

impl FlowTrees {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["handled", "elapsedMicros", "jobs", "children"];
    /// One job's values.
    const JOB: &[&str] = &["held", "parentKey", "children"];
    /// One child's values.
    const CHILD: &[&str] = &["key", "state", "under"];

    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("flow_tree", Self::LAYOUT, reply)?;
        let handled = f.next("handled").count()?;
        let elapsed_us = f.next("elapsedMicros").count()?;
        let jobs = f.next("jobs").rows(Self::JOB)?;
        let mut children = f.next("children").rows(Self::CHILD)?.into_iter();
        if jobs.len() as u64 != handled {
            return Err(wrong_shape("flow_tree", "one row of `jobs` per handled id"));
        }
        let mut trees = Vec::with_capacity(jobs.len());
        for mut job in jobs {
            let held = job.next("held").text()?;
            let parent = job.next("parentKey").text()?;
            let n = job.next("children").count()?;
            let mut tree = FlowTree {
                held: (!held.is_empty()).then_some(held),
                parent: (!parent.is_empty()).then_some(parent),
                children: Vec::new(),
            };
            for _ in 0..n {
                let Some(row) = children.next() else {
                    return Err(wrong_shape("flow_tree", "fewer `children` than counted"));
                };
                tree.children.push(child(row)?);
            }
            trees.push(tree);
        }
        if children.next().is_some() {
            return Err(wrong_shape("flow_tree", "more `children` than counted"));
        }
        Ok(FlowTrees { trees, elapsed_us })
    }
}

/// One row of `children`.
fn child(mut row: Fields) -> RedisResult<FlowChild> {
    Ok(FlowChild {
        key: row.next("key").text()?,
        state: row.next("state").text()?,
        under: row.next("under").text()?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::text;
    use super::*;

    fn reply(handled: i64, jobs: Vec<Value>, children: Vec<Value>) -> Value {
        Value::Array(vec![
            Value::Int(handled),
            Value::Int(7),
            Value::Array(jobs),
            Value::Array(children),
        ])
    }

    fn kid(key: &str) -> Vec<Value> {
        vec![text(key), text("completed"), text("bull:q:1")]
    }

    #[test]
    fn trees_take_their_counted_children_and_a_miscount_is_an_error() {
        let jobs = vec![
            text(""),
            text(""),
            Value::Int(2),
            text("locked"),
            text("bull:p:9"),
            Value::Int(0),
        ];
        let children = [kid("bull:parts:1"), kid("bull:parts:2")].concat();
        let out = FlowTrees::decode(reply(2, jobs.clone(), children.clone())).unwrap();
        assert_eq!(out.trees.len(), 2);
        assert_eq!(out.trees[0].held, None);
        assert_eq!(out.trees[0].children[1].key, "bull:parts:2");
        assert_eq!(out.trees[0].children[1].under, "bull:q:1");
        assert_eq!(out.trees[1].held.as_deref(), Some("locked"));
        assert_eq!(out.trees[1].parent.as_deref(), Some("bull:p:9"));
        assert!(FlowTrees::decode(reply(2, jobs.clone(), kid("bull:parts:1"))).is_err());
        let extra = [children, kid("bull:parts:3")].concat();
        assert!(FlowTrees::decode(reply(2, jobs.clone(), extra)).is_err());
        assert!(FlowTrees::decode(reply(3, jobs, Vec::new())).is_err());
    }
}
