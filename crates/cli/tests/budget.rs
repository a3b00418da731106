//! A script's time budget holds on every server: Redis 8.2 and Valkey 8.1 and 9.1 freeze
//! `TIME` inside a script, so a budget read from it never runs out and a batch runs to its job
//! limit (thousands of jobs, tens of milliseconds). With a budget of one microsecond, every
//! batch must stop at its first look at the clock: after one chunk of 32 jobs. This counts
//! jobs, not time, so it holds on a loaded host.

mod common;

use bullsweep_core::engine::{self, Event, Mode, Observer, SweepOptions};
use bullsweep_policy::JobState;
use common::{World, now_ms, spec};
use redis::Commands;
use std::sync::Mutex;

/// The jobs the sweep reads between two looks at the clock (`LOOK_EVERY` in sweep_prefix.lua).
const LOOK_EVERY: u64 = 32;

/// The jobs each batch acted on, as the sweep tells its progress.
#[derive(Default)]
struct Batches(Mutex<Vec<u64>>);

impl Observer for Batches {
    fn event(&self, event: &Event<'_>) {
        if let Event::Progress { acted } = event {
            self.0.lock().expect("batches").push(*acted);
        }
    }
}

#[test]
fn a_batch_stops_at_its_first_look_past_the_budget() {
    let w = World::new();
    w.seed(spec("bull:mail", 3_000, 0, 1), now_ms());
    let set = bullsweep_policy::compile(
        "budget.yaml",
        "version: 1\npolicies:\n  - { name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1ms } } }\n",
    )
    .expect("policy");
    let batches = Batches::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let report = rt.block_on(async {
        let mut con = bullsweep_base::connect::connect_url(&w.url(), "budget-test")
            .await
            .expect("connect");
        let opts = SweepOptions::at(now_ms(), 1, "budget-test");
        engine::sweep(&mut con, &set, &opts, Mode::Run, &batches)
            .await
            .expect("sweep")
    });
    let batches = batches.0.into_inner().expect("batches");
    assert_eq!(report.done(), 3_000, "every job is removed");
    assert_eq!(batches.iter().sum::<u64>(), 3_000);
    let largest = batches.iter().copied().max().unwrap_or(0);
    assert!(
        largest <= LOOK_EVERY,
        "a batch of {largest} jobs ran past a 1 µs budget: the script's clock does not advance"
    );
    let mut con = w.con();
    let left: u64 = con
        .zcard(
            bullsweep_core::bullmq::QueueKeys::new("bull:mail").finished_set(JobState::Completed),
        )
        .expect("zcard");
    assert_eq!(left, 0);
    let jobs: Vec<String> = con.keys("bull:mail:[0-9]*").expect("keys");
    assert!(jobs.is_empty(), "job hashes left: {}", jobs.len());
}
