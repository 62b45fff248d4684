//! What tern's benchmarks read of their own process from Linux's `/proc`: the
//! peak resident memory and the CPU time used so far. Each benchmark point
//! runs in its own process, so these are the point's own. Where `/proc` does
//! not tell (another system), each reads 0. No dependency, so that the small
//! crates (tern-contention, tern-advisor) take it without tern-core.

/// The peak resident memory of this process in KiB (`VmHWM` of `/proc/self/status`).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// CPU seconds of this process so far, all its threads, ended ones included
/// (user + system of `/proc/self/stat`, in clock ticks of 1/100 s as on Linux).
pub fn process_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which is in parentheses and may hold spaces).
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(0.0)
}

/// CPU seconds of this process's main thread so far, to the nanosecond
/// (`/proc/self/schedstat`): for a single-threaded measurement shorter than
/// [`process_cpu_seconds`]'s ticks can tell.
pub fn main_thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |ns| ns / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_linux_the_process_has_used_memory_and_time() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            println!("skipped: no /proc on this system");
            return;
        }
        assert!(peak_rss_kib() > 0);
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i * i));
        }
        assert!(main_thread_cpu_seconds() > 0.0, "{x}");
    }
}
