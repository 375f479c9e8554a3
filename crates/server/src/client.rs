//! A client connection as the server knows it: its id, its peer, and who authenticated on it.

use crate::roles::{role_grants, Action};
use crate::scram::Conversation;
use parking_lot::Mutex;
use std::net::SocketAddr;

pub struct ConnInfo {
    pub id: i32,
    pub peer: SocketAddr,
    /// Who authenticated on this connection, and a SCRAM conversation in progress.
    pub auth: Mutex<ConnAuth>,
    /// The application name the handshake's client metadata gave (`client.application.name`).
    app_name: Mutex<Option<String>>,
}

impl ConnInfo {
    /// A caller inside the process (the lab's in-process cluster), not a network peer: it
    /// counts as a local client.
    pub fn in_process(id: i32) -> ConnInfo {
        ConnInfo::new(id, SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// A connection from `peer`, nobody authenticated on it yet.
    pub fn new(id: i32, peer: SocketAddr) -> ConnInfo {
        ConnInfo {
            id,
            peer,
            auth: Mutex::new(ConnAuth::default()),
            app_name: Mutex::new(None),
        }
    }

    /// The application name the client gave in its handshake, if any.
    pub fn app_name(&self) -> Option<String> {
        self.app_name.lock().clone()
    }

    /// Kept from the handshake; a later handshake on the same connection cannot change it
    /// (mongod refuses client metadata twice).
    pub fn set_app_name(&self, name: &str) {
        self.app_name.lock().get_or_insert_with(|| name.to_string());
    }
}

/// An authenticated user and its roles.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthedUser {
    pub user: String,
    pub db: String,
    pub roles: Vec<(String, String)>,
}

/// A connection's authentication state.
#[derive(Default)]
pub struct ConnAuth {
    pub users: Vec<AuthedUser>,
    pub conversation: Option<Conversation>,
    /// The client asked to end the exchange right after the server-final message.
    pub skip_empty_exchange: bool,
    /// A replica-set member's handshake in progress: the nonce this server sent
    /// (`replset::wire`).
    pub member_nonce: Option<[u8; 32]>,
    /// Another member of the set proved it holds the cluster key on this connection.
    pub member: bool,
}

impl ConnAuth {
    pub fn is_authenticated(&self) -> bool {
        !self.users.is_empty()
    }
    pub fn allows(&self, action: Action, db: &str) -> bool {
        self.users.iter().any(|u| {
            u.roles
                .iter()
                .any(|(r, rdb)| role_grants(r, rdb, action, db))
        })
    }
}
