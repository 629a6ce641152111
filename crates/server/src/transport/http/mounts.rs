//! The endpoints beside the main one on a listener ([`HttpConfig::mounts`]):
//! a table the application may change while it serves — a gateway adds
//! and removes virtual servers on reload — and the listener's view of it,
//! rebuilt only when the table changed.
//!
//! Layer: transport (HTTP).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::{HttpConfig, handler};
use crate::{ConfigError, ResourceServer, Server};

/// Another MCP endpoint served on the listener of an [`HttpConfig`].
#[derive(Clone)]
pub struct Mount {
    /// Its path (absolute; distinct from every other endpoint's).
    pub path: String,
    /// What it serves.
    pub server: Server,
    /// Its token verifier, when its callers must authenticate: each
    /// endpoint names its own resource (audience) and scopes.
    pub auth: Option<Arc<ResourceServer>>,
}

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mount")
            .field("path", &self.path)
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

/// The mounted endpoints of a listener: a handle shared by whoever set
/// them up and the listener serving them. [`Mounts::set`] replaces them
/// while it serves; requests already taken finish where they began, and
/// an endpoint whose path, server and verifier are unchanged keeps its
/// sessions.
#[derive(Clone, Default)]
pub struct Mounts(Arc<Table>);

#[derive(Default)]
struct Table {
    list: RwLock<Arc<[Mount]>>,
    version: AtomicU64,
}

impl std::fmt::Debug for Mounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.get().iter()).finish()
    }
}

impl From<Vec<Mount>> for Mounts {
    fn from(list: Vec<Mount>) -> Self {
        Self(Arc::new(Table {
            list: RwLock::new(list.into()),
            version: AtomicU64::new(0),
        }))
    }
}

impl Mounts {
    /// The endpoints mounted now.
    pub fn get(&self) -> Arc<[Mount]> {
        self.0.list.read().clone()
    }

    /// Serve `list` from now on, in place of what is mounted. `Err`, and
    /// nothing changed, when a path is not absolute, two share one, or a
    /// verifier does not fit its path. A path that is the main
    /// endpoint's stays the main endpoint's.
    pub fn set(&self, list: Vec<Mount>) -> Result<(), ConfigError> {
        check(&list, None)?;
        *self.0.list.write() = list.into();
        self.0.version.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn version(&self) -> u64 {
        self.0.version.load(Ordering::Acquire)
    }
}

/// Refuse mounts that cannot be served: a relative path, a path twice
/// (or the main endpoint's, `main`), a verifier that does not fit.
pub(super) fn check(list: &[Mount], main: Option<&str>) -> Result<(), ConfigError> {
    let mut paths: std::collections::HashSet<&str> = main.into_iter().collect();
    for mount in list {
        if !mount.path.starts_with('/') {
            return Err(ConfigError::Path(mount.path.clone()));
        }
        if !paths.insert(mount.path.as_str()) {
            return Err(ConfigError::SamePath(mount.path.clone()));
        }
        if let Some(auth) = &mount.auth {
            auth.validate(&mount.path)?;
        }
    }
    Ok(())
}

/// Each mounted path with its endpoint's state.
pub(super) type States = Arc<[(Box<str>, handler::State)]>;

/// What the listener serves beside its main endpoint: each mount with its
/// own state (sessions, verifier), rebuilt from [`Mounts`] when it
/// changed.
pub(super) struct Served {
    table: Mounts,
    /// The listener's settings, each mount's path and verifier put in.
    base: HttpConfig,
    in_flight: Arc<tokio::sync::Semaphore>,
    built: RwLock<(u64, States)>,
}

impl Served {
    pub(super) fn new(base: &HttpConfig, in_flight: Arc<tokio::sync::Semaphore>) -> Self {
        let table = base.mounts.clone();
        let base = HttpConfig {
            mounts: Mounts::default(),
            routes: None,
            ..base.clone()
        };
        let version = table.version();
        let states = build(&table.get(), &[], &base, &in_flight);
        Self {
            table,
            base,
            in_flight,
            built: RwLock::new((version, states)),
        }
    }

    /// The mounted endpoints now, each with its state.
    pub(super) fn current(&self) -> States {
        let version = self.table.version();
        {
            let built = self.built.read();
            if built.0 == version {
                return built.1.clone();
            }
        }
        let mut built = self.built.write();
        if built.0 != version {
            let states = build(&self.table.get(), &built.1, &self.base, &self.in_flight);
            *built = (version, states);
        }
        built.1.clone()
    }
}

/// The states of `list`, reusing those of `old` whose path, server and
/// verifier are the same (so their sessions live on).
fn build(
    list: &[Mount],
    old: &[(Box<str>, handler::State)],
    base: &HttpConfig,
    in_flight: &Arc<tokio::sync::Semaphore>,
) -> States {
    list.iter()
        .map(|m| {
            let kept = old.iter().find(|(path, state)| {
                **path == *m.path
                    && state.server().same(&m.server)
                    && match (state.auth(), &m.auth) {
                        (None, None) => true,
                        (Some(a), Some(b)) => Arc::ptr_eq(&a, b),
                        _ => false,
                    }
            });
            let state = match kept {
                Some((_, state)) => state.clone(),
                None => {
                    let config = HttpConfig {
                        path: m.path.clone(),
                        auth: m.auth.clone(),
                        ..base.clone()
                    };
                    handler::State::sharing(m.server.clone(), config, in_flight.clone())
                }
            };
            (m.path.as_str().into(), state)
        })
        .collect()
}
