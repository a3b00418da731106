//! What a large policy file costs to compile, in heap bytes: the most held at once while a
//! file of one-line policies is read, checked and compiled, counted by this test's allocator.
//! The count is of work done, not of time: the same file and the same code allocate the same
//! bytes on every run. One test only, so that nothing else allocates in this binary meanwhile.

use bullsweep_policy::compile;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes held now and the most held at once.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(held, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A file of `n` one-line policies under a file-wide `pii:` (80 bytes a policy: 50,000 make the
/// 4 MB file of issue 42).
fn file(n: usize) -> String {
    let mut text = String::from(
        "version: 1\npii:\n  paths: [data.user.email, data.user.phone, data.card, returnvalue.user.email]\n  patterns: [email, credit-card]\npolicies:\n",
    );
    for i in 0..n {
        text.push_str(&format!(
            "  - {{ name: p{i}, queueNamePattern: q{i}, rules: {{ completed: {{ maxAge: 1d }} }} }}\n"
        ));
    }
    text
}

#[test]
fn a_file_of_ten_thousand_policies_compiles_in_under_4_kb_a_policy() {
    const POLICIES: usize = 10_000;
    let text = file(POLICIES);
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let set = compile("big.yaml", &text).unwrap_or_else(|e| panic!("compiles:\n{e}"));
    assert_eq!(set.policies.len(), POLICIES);
    let per_policy = (PEAK.load(Ordering::Relaxed) - before) / POLICIES;
    // Measured: 1,804 bytes a policy (each policy as written, then as compiled); 22,511 before
    // issue 42 (a tree of the whole file, every written policy's unused fields inline, a regex
    // per queue name, a rule map's empty slots and a copy of `pii:` per policy).
    assert!(
        per_policy < 4_096,
        "compiling held {per_policy} bytes a policy at its peak"
    );
}
