//! A run's view: the hub its consumer draws for, and the page's server when
//! it is served. The CLI's `--serve` and a Python viewer (`serve=`, notebook
//! widgets) each hold one; stopping it ends every client.

use std::sync::Arc;

use anyhow::Result;

use crate::{Bound, Controls, Hub, Server};

/// A hub, and the server of its page once served.
pub struct View {
    /// The clients and their frames: the run's watchers.
    pub hub: Arc<Hub>,
    server: Option<Server>,
}

impl View {
    /// A hub with `encoders` encoder threads, not served.
    pub fn new(encoders: usize) -> Self {
        Self { hub: Hub::new(encoders), server: None }
    }

    /// Serves the page on `bound`; its keys and pointer go to `controls`.
    pub fn serve(&mut self, bound: Bound, controls: Arc<dyn Controls>) -> Result<()> {
        self.server = Some(Server::start(bound, self.hub.clone(), controls)?);
        Ok(())
    }

    /// The page's URL (with its token when one is needed), once served.
    pub fn url(&self) -> Option<&str> {
        self.server.as_ref().map(Server::url)
    }

    /// The page's token (for a URL another server forwards: `?token=`), once served.
    pub fn token(&self) -> Option<&str> {
        self.server.as_ref().map(Server::token)
    }

    /// Closes the clients (the page's and the widgets'), frees the port and stops the encoders.
    pub fn stop(&mut self) {
        if let Some(server) = &mut self.server {
            server.stop();
        }
        self.hub.close();
    }
}
