//! The resource watcher's judgement on made-up readings: what trips each condition, the
//! hysteresis that keeps a reading at the line from flapping, and which switches it makes with
//! and without `auto_recover`. The switches on a real full filesystem and in a real memory
//! cgroup are tests/suite/watchdog.rs.

use tw_core::OperationalMode::{self, Alert, Degraded, Lockdown, Normal, Recovery};

use super::*;

const MIB: u64 = 1 << 20;

fn settings() -> WatchdogSettings {
    WatchdogSettings {
        disk_free_min_mb: 100,
        disk_free_resume_mb: 200,
        memory_available_min_mb: 50,
        memory_available_resume_mb: 80,
        memory_pressure_max: 40.0,
        memory_pressure_resume: 10.0,
        ..WatchdogSettings::default()
    }
}

fn fine() -> Readings {
    Readings {
        disk_free: Some(1000 * MIB),
        memory_available: Some(1000 * MIB),
        memory_pressure: Some(0.0),
        audit_failures: 0,
        audit_healthy: true,
    }
}

/// The mode each reading in turn calls for.
fn wanted_over(readings: &[Readings]) -> Vec<Option<OperationalMode>> {
    let mut judge = Judge::default();
    readings
        .iter()
        .map(|r| called_for(judge.look(r, &settings())))
        .collect()
}

#[test]
fn each_condition_trips_below_its_floor_and_clears_only_past_its_resume_level() {
    let disk = |mb| Readings {
        disk_free: Some(mb * MIB),
        ..fine()
    };
    // 150 MiB is between the floor and the resume level: it keeps what was there.
    assert_eq!(
        wanted_over(&[
            disk(150),
            disk(99),
            disk(150),
            disk(199),
            disk(200),
            disk(150)
        ]),
        [
            None,
            Some(Degraded),
            Some(Degraded),
            Some(Degraded),
            None,
            None
        ]
    );
    let memory = |mb, psi| Readings {
        memory_available: Some(mb * MIB),
        memory_pressure: Some(psi),
        ..fine()
    };
    assert_eq!(
        wanted_over(&[
            memory(49, 0.0),
            memory(79, 0.0),
            memory(80, 0.0),
            memory(500, 40.0),
            memory(500, 10.0),
            memory(500, 9.9),
        ]),
        [
            Some(Degraded),
            Some(Degraded),
            None,
            Some(Degraded),
            Some(Degraded),
            None
        ]
    );
    // Failures since the last look degrade; a store that takes nothing locks down, and a
    // reading the host does not offer trips nothing.
    let audit = |failures, healthy| Readings {
        audit_failures: failures,
        audit_healthy: healthy,
        disk_free: None,
        memory_available: None,
        memory_pressure: None,
    };
    assert_eq!(
        wanted_over(&[
            audit(0, true),
            audit(2, true),
            audit(2, true),
            audit(3, false),
            audit(3, true)
        ]),
        [None, Some(Degraded), None, Some(Lockdown), None]
    );
}

#[test]
fn a_reason_says_what_was_measured_against_what() {
    let mut judge = Judge::default();
    let r = Readings {
        disk_free: Some(MIB / 2),
        memory_pressure: Some(55.5),
        audit_healthy: false,
        ..fine()
    };
    let active = judge.look(&r, &settings()).clone();
    assert_eq!(
        active.values().cloned().collect::<Vec<_>>(),
        [
            "free space on the data directory's filesystem is 0.5 MiB, below 100 MiB",
            "memory pressure (PSI some avg10) is 55.5%, at or above 40%",
            "the audit log cannot be written: nothing may run unaudited",
        ]
    );
    assert_eq!(called_for(&active), Some(Lockdown));
}

#[test]
fn the_watcher_only_tightens_and_a_person_goes_back_unless_auto_recover_is_on() {
    // Without auto_recover: up to degraded, up to lockdown, then held; cleared is said once.
    let mut c = Claim::default();
    assert_eq!(
        c.decide(Normal, Some(Degraded), false),
        Step::Switch(Degraded)
    );
    assert_eq!(c.decide(Degraded, Some(Degraded), false), Step::Stay);
    assert_eq!(
        c.decide(Degraded, Some(Lockdown), false),
        Step::Switch(Lockdown)
    );
    assert_eq!(c.decide(Lockdown, Some(Degraded), false), Step::Stay);
    assert_eq!(c.decide(Lockdown, None, false), Step::Cleared);
    assert_eq!(c.decide(Lockdown, None, false), Step::Stay);
    // A person's switch is theirs: the watcher claims nothing after it.
    assert_eq!(c.decide(Recovery, None, false), Step::Stay);
    assert_eq!(c.decide(Normal, None, false), Step::Stay);

    // A stricter mode a person chose is left alone.
    let mut c = Claim::default();
    assert_eq!(c.decide(Lockdown, Some(Degraded), true), Step::Stay);
    assert_eq!(c.decide(Lockdown, None, true), Step::Stay);

    // With auto_recover: back down step by step, to the mode it left (alert here).
    let mut c = Claim::default();
    assert_eq!(
        c.decide(Alert, Some(Lockdown), true),
        Step::Switch(Lockdown)
    );
    assert_eq!(
        c.decide(Lockdown, Some(Degraded), true),
        Step::Switch(Degraded)
    );
    assert_eq!(c.decide(Degraded, Some(Degraded), true), Step::Stay);
    assert_eq!(c.decide(Degraded, None, true), Step::Switch(Alert));
    assert_eq!(c.decide(Alert, None, true), Step::Stay);
}
