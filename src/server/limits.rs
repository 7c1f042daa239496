//! How many connections the admission port may hold: what the process's
//! file-descriptor limit leaves once everything else has its descriptors.
//!
//! Each connection costs one descriptor. Beyond them the process needs
//! [`RESERVED_DESCRIPTORS`] (standard streams, the runtime's epoll and wakers,
//! both listeners, the config and certificate watches and the files they
//! read, the Kubernetes client's connections — the namespace watch and live
//! GETs — and the OTLP exporter's) and the probe port's own
//! [`PROBE_MAX_CONNECTIONS`]. So the admission port is capped at the soft
//! `RLIMIT_NOFILE` minus both, and a flood of connections is refused at
//! accept instead of starving `/healthz`, the cache watch and the API client
//! of descriptors. With a generous limit (containerd 1.x gives 1048576), memory
//! runs out first: the cap is at most [`MEMORY_CEILING`]. `--max-connections`
//! overrides the derived value.

use tracing::warn;

/// Descriptors kept for everything but connections.
pub(crate) const RESERVED_DESCRIPTORS: u64 = 64;
/// Connections the probe port (kubelet probes, Prometheus scrapes) may hold.
pub(crate) const PROBE_MAX_CONNECTIONS: usize = 32;
/// The cap when the limit is so low that the reserve does not fit.
const FLOOR: usize = 16;
/// The highest derived cap: idle connections cost about 12 KiB (TLS done, nothing sent) to 32 KiB
/// (HTTP/2 after a request) each, so 4096 of them stay near 130 MiB, inside the chart's 256 Mi limit.
/// An API server keeps a few connections per replica.
pub(crate) const MEMORY_CEILING: usize = 4096;

/// The soft `RLIMIT_NOFILE`; `None` when it cannot be read or is unlimited.
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
pub(crate) fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given and reads nothing else.
    let result = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    // rlim_t is u64 on Linux, not everywhere.
    #[allow(clippy::unnecessary_cast)]
    let soft = limit.rlim_cur as u64;
    (result == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(soft)
}

/// The admission port's connection cap for a soft descriptor limit of `soft`.
pub(crate) fn derived_max_connections(soft: u64) -> usize {
    let reserve = RESERVED_DESCRIPTORS + PROBE_MAX_CONNECTIONS as u64;
    let left = soft.saturating_sub(reserve);
    usize::try_from(left).unwrap_or(usize::MAX).clamp(FLOOR, MEMORY_CEILING)
}

/// The cap in effect: `flag` when given, else derived from the descriptor limit;
/// warns when the limit leaves too little or the flag asks for more than it allows.
pub(crate) fn max_connections(flag: Option<usize>) -> usize {
    let limit = open_files_limit();
    let derived = limit.map(derived_max_connections);
    match (flag, limit, derived) {
        (Some(flag), Some(limit), Some(derived)) if flag > derived => {
            warn!(
                max_connections = flag,
                open_files_limit = limit,
                fits = derived,
                "--max-connections exceeds what RLIMIT_NOFILE leaves for connections; \
                 a flood may exhaust descriptors (raise the limit or lower the flag)"
            );
            flag
        }
        (Some(flag), ..) => flag,
        (None, Some(limit), Some(derived)) => {
            if limit < RESERVED_DESCRIPTORS + PROBE_MAX_CONNECTIONS as u64 + FLOOR as u64 {
                warn!(
                    open_files_limit = limit,
                    max_connections = derived,
                    "RLIMIT_NOFILE is very low; raise it (ulimit -n) for a usable connection limit"
                );
            }
            derived
        }
        // Unlimited (or unreadable): bounded by memory, not descriptors.
        (None, ..) => MEMORY_CEILING,
    }
}

#[cfg(test)]
mod tests;
