//! The process's file descriptors. The daemon raises its soft limit to the hard one at
//! start, and caps its HTTP connections so that [`RESERVED`] descriptors always stay for
//! the work: the audit file, archive segments, Redis, S3 and PostgreSQL connections.

/// Descriptors kept for the work, whatever the connections take: Redis connections (one
/// per primary for the sweeps, the events reader and the dashboard), the audit file and
/// its lock, the segment being written and read back, S3 and PostgreSQL connections, the
/// runtimes' own, with room to spare.
pub const RESERVED: u64 = 128;

/// The fewest connections served, however low the limit.
const MIN_CONNECTIONS: usize = 8;

/// Raises the soft limit on open descriptors to the hard limit (systemd leaves the soft one
/// at 1024), and returns the soft limit now in force; `None` where it cannot be read.
#[cfg(unix)]
pub fn raise_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write only the struct given, which lives on
    // this stack frame for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur)
}

/// Elsewhere the limit is left as it is, and unknown.
#[cfg(not(unix))]
pub fn raise_limit() -> Option<u64> {
    None
}

/// The connections served at most: `wanted`, and fewer when the descriptor limit would
/// leave less than [`RESERVED`] for the work.
pub fn connection_cap(wanted: usize, limit: Option<u64>) -> usize {
    let room = limit.map_or(usize::MAX, |l| {
        usize::try_from(l.saturating_sub(RESERVED)).unwrap_or(usize::MAX)
    });
    wanted.min(room).max(MIN_CONNECTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_for_the_work() {
        assert_eq!(connection_cap(256, Some(1024)), 256);
        assert_eq!(connection_cap(256, Some(256)), 128);
        assert_eq!(connection_cap(256, Some(100)), MIN_CONNECTIONS);
        assert_eq!(connection_cap(256, None), 256);
    }
}
