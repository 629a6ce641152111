//! A server as its own tools may hold it: a weak handle (a tool that
//! holds its server strongly would keep it alive forever), and the
//! definitions of its tools as a caller may see them.

use std::sync::{Arc, Weak};

use toolgate_protocol::types::Tool;

use crate::server::Inner;
use crate::{AuthContext, Server};

/// A handle to a [`Server`] that does not keep it alive.
#[derive(Clone)]
pub struct WeakServer {
    inner: Weak<Inner>,
}

impl WeakServer {
    /// The server, while it is still there.
    pub fn upgrade(&self) -> Option<Server> {
        self.inner.upgrade().map(|inner| Server { inner })
    }
}

impl std::fmt::Debug for WeakServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakServer")
    }
}

impl Server {
    /// A handle that does not keep the server alive: for what the
    /// server's own tools hold.
    pub fn downgrade(&self) -> WeakServer {
        WeakServer {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// The definition of the tool `name`, listed or not (reached through a
    /// router), as `tools/list` would show it to `auth`; `None` when there is none, or `auth` may
    /// not see it.
    pub fn tool(&self, name: &str, auth: Option<&AuthContext>) -> Option<Tool> {
        let inner = &self.inner;
        let tool = inner
            .tools
            .get(name, auth)
            .or_else(|| inner.unlisted.get(name, auth))?;
        Some(tool.tool.clone())
    }
}
