//! Where the view listens: `PORT` (on 127.0.0.1) or `ADDR:PORT`, bound
//! before any GPU work so a port in use is the first error; and the access
//! token: any address but loopback requires it, and on loopback it lets in a
//! page that another server forwards (JupyterHub's proxy), whose `Host`
//! and `Origin` are that server's.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::str::FromStr;

use subtle::ConstantTimeEq;

/// An address to listen on, as the user gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address(pub SocketAddr);

/// What is wrong with a `--serve` or `serve=` value, or why it cannot be bound.
#[derive(Debug)]
pub enum ServeError {
    /// Not `PORT` or `ADDR:PORT`.
    Malformed {
        /// The value given.
        given: String,
    },
    /// The address cannot be listened on (in use, not this machine's, no permission).
    Bind {
        /// The address.
        at: SocketAddr,
        /// Why.
        error: std::io::Error,
    },
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Malformed { given } => write!(
                f,
                "'{given}' is not PORT or ADDR:PORT (e.g. 8080, 127.0.0.1:8080, 0.0.0.0:8080, [::1]:8080)"
            ),
            ServeError::Bind { at, error } if error.kind() == std::io::ErrorKind::AddrInUse => {
                write!(f, "cannot listen on {at}: the port is in use (another program, or a vkcuda still running, has it); pick another port, or 0 for any free one")
            }
            ServeError::Bind { at, error } => write!(f, "cannot listen on {at}: {error}"),
        }
    }
}

impl std::error::Error for ServeError {}

impl FromStr for Address {
    type Err = ServeError;

    fn from_str(s: &str) -> Result<Self, ServeError> {
        let bad = || ServeError::Malformed { given: s.to_string() };
        if let Ok(port) = s.parse::<u16>() {
            return Ok(Address(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
        }
        if let Some(port) = s.strip_prefix("localhost:") {
            let port = port.parse::<u16>().map_err(|_| bad())?;
            return Ok(Address(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
        }
        s.parse::<SocketAddr>().map(Address).map_err(|_| bad())
    }
}

impl Address {
    /// Whether a client needs the token: anything but loopback.
    pub fn needs_token(&self) -> bool {
        !self.0.ip().is_loopback()
    }

    /// Binds it, and makes the token it needs.
    pub fn bind(self) -> Result<Bound, ServeError> {
        let listener = TcpListener::bind(self.0).map_err(|error| ServeError::Bind { at: self.0, error })?;
        let at = listener.local_addr().map_err(|error| ServeError::Bind { at: self.0, error })?;
        listener.set_nonblocking(true).map_err(|error| ServeError::Bind { at, error })?;
        Ok(Bound { listener, at, token: Token::random(), loopback: !self.needs_token() })
    }
}

/// A random access token: 128 bits, hex.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    fn random() -> Self {
        let mut bytes = [0u8; 16];
        // No randomness means no safe token: then the token is the clock's nanoseconds
        // mixed with the process id, and the server says so.
        if getrandom::fill(&mut bytes).is_err() {
            log::warn!("vkcuda: no system randomness: the view's token is weak");
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            bytes[..8].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
            bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        }
        Token(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Whether `given` is the token, compared in constant time.
    pub fn matches(&self, given: &str) -> bool {
        self.0.len() == given.len() && bool::from(self.0.as_bytes().ct_eq(given.as_bytes()))
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A bound listener, not yet serving.
pub struct Bound {
    pub(crate) listener: TcpListener,
    /// The address bound (the port the system chose, for port 0).
    pub at: SocketAddr,
    pub(crate) token: Token,
    /// Bound to loopback: a page of this machine (or through an `ssh -L` tunnel) needs no token.
    pub(crate) loopback: bool,
}

impl Bound {
    /// The page's URL, with the token when one is needed. An unspecified
    /// address (0.0.0.0) is named by this machine's host name.
    pub fn url(&self) -> String {
        let host = match self.at.ip() {
            ip if ip.is_unspecified() => host_name().unwrap_or_else(|| "localhost".into()),
            IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        match self.loopback {
            false => format!("http://{host}:{}/?token={}", self.at.port(), self.token.as_str()),
            true => format!("http://{host}:{}/", self.at.port()),
        }
    }

    /// The token (a page forwarded by another server carries it: `?token=`).
    pub fn token(&self) -> &str {
        self.token.as_str()
    }
}

fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_is_loopback_and_needs_no_token() {
        let a: Address = "8080".parse().unwrap();
        assert_eq!(a.0.to_string(), "127.0.0.1:8080");
        assert!(!a.needs_token());
        assert!(!"localhost:9".parse::<Address>().unwrap().needs_token());
        assert!(!"[::1]:9".parse::<Address>().unwrap().needs_token());
        assert!("0.0.0.0:9".parse::<Address>().unwrap().needs_token());
        assert!("10.1.2.3:9".parse::<Address>().unwrap().needs_token());
        for bad in ["", "x", "70000", "1.2.3.4", "host:80", "1.2.3.4:x"] {
            assert!(bad.parse::<Address>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_port_in_use_is_a_clear_error() {
        let first = "127.0.0.1:0".parse::<Address>().unwrap().bind().unwrap();
        let again = Address(first.at).bind().err().unwrap().to_string();
        assert!(again.contains("the port is in use"), "{again}");
    }

    #[test]
    fn tokens_are_random_and_compared_whole() {
        let (a, b) = (Token::random(), Token::random());
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(a.as_str().len(), 32);
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(&a.as_str()[..31]));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(""));
    }
}
