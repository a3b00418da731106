//! What the engine asks of the operating system.

/// Lowers the calling thread's scheduling priority to the lowest (nice 19), so that on a
/// small machine shared with Redis, encoding archive segments never preempts Redis mid-call.
#[cfg(target_os = "linux")]
pub(crate) fn yield_cpu_to_redis() {
    unsafe extern "C" {
        fn setpriority(which: i32, who: u32, prio: i32) -> i32;
        fn gettid() -> i32;
    }
    const PRIO_PROCESS: i32 = 0;
    // SAFETY: both calls take plain integers and only affect this thread; a failure leaves
    // the priority as it was, which is harmless.
    unsafe {
        let tid = gettid();
        if tid > 0 {
            setpriority(PRIO_PROCESS, tid as u32, 19);
        }
    }
}

/// Elsewhere the thread keeps its priority: a thread-level nice is Linux's.
#[cfg(not(target_os = "linux"))]
pub(crate) fn yield_cpu_to_redis() {}
