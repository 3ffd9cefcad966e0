//! One debounced file watcher for the runtime: the policy files and the skills directory are
//! watched through the same `notify` watcher, each by a subscription that names what it cares
//! about and what to do once a burst of changes has settled.
//!
//! Editors save by writing a temporary file and renaming it over the old one, so a file is
//! watched through its directory and a change is acted on [`DEBOUNCE`] after the last event of a
//! burst, once. A subscription's action returns `false` when whatever it serves is gone (the
//! runtime closed), which ends the subscription's task; dropping the [`Subscription`] ends it
//! too and stops watching its directory unless another subscription still needs it.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

/// How long a burst of changes must have been quiet before the action runs.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(250);

/// What a subscription does once changes settle: `false` ends the subscription.
pub(crate) type Action = Box<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// Which changed paths a subscription cares about.
type Matcher = Box<dyn Fn(&Path) -> bool + Send + Sync>;

struct Sub {
    dir: PathBuf,
    recursive: bool,
    matches: Matcher,
    nudge: mpsc::UnboundedSender<()>,
}

/// The `notify` watcher and what it watches. Locked apart from the subscriptions: `notify`'s
/// event thread takes the subscriptions' lock to dispatch, and (un)watching waits on that
/// thread, so the two are never held together in that order.
#[derive(Default)]
struct Watched {
    watcher: Option<notify::RecommendedWatcher>,
    /// What each directory is watched as now (recursive or not).
    dirs: HashMap<PathBuf, bool>,
}

#[derive(Default)]
struct Inner {
    watched: Mutex<Watched>,
    subs: Arc<Mutex<HashMap<u64, Sub>>>,
    next: std::sync::atomic::AtomicU64,
}

/// The runtime's one file watcher. Cheap to clone; clones share it.
#[derive(Clone, Default)]
pub(crate) struct FileWatcher {
    inner: Arc<Inner>,
}

/// A live subscription; dropping it stops it.
pub(crate) struct Subscription {
    id: u64,
    inner: std::sync::Weak<Inner>,
    task: tokio::task::JoinHandle<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FileWatcher {
    /// Keeps `slot` subscribed to `dir` (an existing directory, below it too when `recursive`)
    /// so that every settled burst of changes calls `reload` on the service `this` points to,
    /// for as long as it lives. Nothing happens when `slot` already holds a subscription or
    /// `dir` is not a directory; a directory that cannot be watched is logged as `what`.
    pub(crate) fn keep<T: Send + Sync + 'static>(
        &self,
        slot: &Mutex<Option<Subscription>>,
        dir: &Path,
        recursive: bool,
        this: std::sync::Weak<T>,
        reload: fn(&T),
        what: &str,
    ) {
        let mut slot = lock(slot);
        if slot.is_some() || !dir.is_dir() {
            return;
        }
        let action: Action = Box::new(move || {
            let this = this.clone();
            Box::pin(async move { this.upgrade().map(|s| reload(&s)).is_some() })
        });
        match self.subscribe(dir, recursive, |_| true, action) {
            Ok(sub) => *slot = Some(sub),
            Err(e) => {
                tracing::warn!(error = %e, "the {what} cannot be watched; changes need a restart")
            }
        }
    }

    /// Watches `dir` (and everything below it when `recursive`) for changes to paths `matches`
    /// accepts; `action` runs once per settled burst, on the async runtime.
    pub(crate) fn subscribe(
        &self,
        dir: &Path,
        recursive: bool,
        matches: impl Fn(&Path) -> bool + Send + Sync + 'static,
        action: Action,
    ) -> notify::Result<Subscription> {
        let (nudge, mut settled) = mpsc::unbounded_channel::<()>();
        let mut watched = lock(&self.inner.watched);
        if watched.watcher.is_none() {
            watched.watcher = Some(notify_watcher(Arc::downgrade(&self.inner.subs))?);
        }
        let id = self
            .inner
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.inner.subs).insert(
            id,
            Sub {
                dir: dir.to_path_buf(),
                recursive,
                matches: Box::new(matches),
                nudge,
            },
        );
        if let Err(e) = rewatch(&mut watched, &self.inner.subs, dir) {
            lock(&self.inner.subs).remove(&id);
            return Err(e);
        }
        drop(watched);
        let task = tokio::spawn(async move {
            while settled.recv().await.is_some() {
                tokio::time::sleep(DEBOUNCE).await;
                while settled.try_recv().is_ok() {}
                if !action().await {
                    break;
                }
            }
        });
        Ok(Subscription {
            id,
            inner: Arc::downgrade(&self.inner),
            task,
        })
    }
}

fn notify_watcher(
    subs: std::sync::Weak<Mutex<HashMap<u64, Sub>>>,
) -> notify::Result<notify::RecommendedWatcher> {
    notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        let Some(subs) = subs.upgrade() else { return };
        for sub in lock(&subs).values() {
            if event.paths.iter().any(|p| {
                let below = if sub.recursive {
                    p.starts_with(&sub.dir)
                } else {
                    p.parent() == Some(sub.dir.as_path()) || p == &sub.dir
                };
                below && (sub.matches)(p)
            }) {
                let _ = sub.nudge.send(());
            }
        }
    })
}

/// Brings the watch on `dir` in line with the subscriptions that need it: recursive if any of
/// them is, none if none is left.
fn rewatch(
    watched: &mut Watched,
    subs: &Mutex<HashMap<u64, Sub>>,
    dir: &Path,
) -> notify::Result<()> {
    let wanted: Option<bool> = lock(subs)
        .values()
        .filter(|s| s.dir == dir)
        .map(|s| s.recursive)
        .reduce(|a, b| a || b);
    let current = watched.dirs.get(dir).copied();
    if wanted == current {
        return Ok(());
    }
    let Some(watcher) = watched.watcher.as_mut() else {
        return Ok(());
    };
    if current.is_some() {
        // The directory may be gone already; then so is its watch.
        let _ = watcher.unwatch(dir);
        watched.dirs.remove(dir);
    }
    if let Some(recursive) = wanted {
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        watcher.watch(dir, mode)?;
        watched.dirs.insert(dir.to_path_buf(), recursive);
    }
    Ok(())
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.task.abort();
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let mut watched = lock(&inner.watched);
        let removed = lock(&inner.subs).remove(&self.id);
        if let Some(sub) = removed {
            let _ = rewatch(&mut watched, &inner.subs, &sub.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counting(count: &Arc<AtomicUsize>) -> Action {
        let count = Arc::clone(count);
        Box::new(move || {
            let count = Arc::clone(&count);
            Box::pin(async move {
                count.fetch_add(1, Ordering::SeqCst);
                true
            })
        })
    }

    async fn settle() {
        tokio::time::sleep(DEBOUNCE * 4).await;
    }

    #[tokio::test]
    async fn two_subscriptions_share_one_watcher_and_each_sees_its_own_paths_once_per_burst() {
        let dir = tempfile::tempdir().unwrap();
        let skills = dir.path().join("skills");
        std::fs::create_dir_all(skills.join("a")).unwrap();
        let policy = dir.path().join("policy.toml");
        let watcher = FileWatcher::default();
        let (policy_hits, skill_hits) = (Arc::default(), Arc::default());
        let wanted = policy.clone();
        let _p = watcher
            .subscribe(
                dir.path(),
                false,
                move |p| p == wanted,
                counting(&policy_hits),
            )
            .unwrap();
        let _s = watcher
            .subscribe(&skills, true, |_| true, counting(&skill_hits))
            .unwrap();

        // A burst of writes to the policy file, and one unrelated file beside it.
        for i in 0..5 {
            std::fs::write(&policy, format!("# {i}\n")).unwrap();
        }
        std::fs::write(dir.path().join("other.txt"), "x").unwrap();
        settle().await;
        assert_eq!(
            (
                policy_hits.load(Ordering::SeqCst),
                skill_hits.load(Ordering::SeqCst)
            ),
            (1, 0)
        );

        // A change deep in the skills directory reaches only its subscription.
        std::fs::write(skills.join("a").join("SKILL.md"), "---\n").unwrap();
        settle().await;
        assert_eq!(
            (
                policy_hits.load(Ordering::SeqCst),
                skill_hits.load(Ordering::SeqCst)
            ),
            (1, 1)
        );
        assert_eq!(lock(&watcher.inner.watched).dirs.len(), 2);
    }

    #[tokio::test]
    async fn a_dropped_subscription_stops_and_unwatches_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let watcher = FileWatcher::default();
        let hits = Arc::default();
        let sub = watcher
            .subscribe(dir.path(), true, |_| true, counting(&hits))
            .unwrap();
        drop(sub);
        std::fs::write(dir.path().join("f"), "x").unwrap();
        settle().await;
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        assert!(lock(&watcher.inner.watched).dirs.is_empty());
    }

    #[tokio::test]
    async fn an_action_that_reports_its_target_gone_ends_the_subscription() {
        let dir = tempfile::tempdir().unwrap();
        let watcher = FileWatcher::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        let _sub = watcher
            .subscribe(
                dir.path(),
                true,
                |_| true,
                Box::new(move || {
                    let r = Arc::clone(&r);
                    Box::pin(async move {
                        r.fetch_add(1, Ordering::SeqCst);
                        false
                    })
                }),
            )
            .unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        settle().await;
        std::fs::write(dir.path().join("g"), "y").unwrap();
        settle().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
