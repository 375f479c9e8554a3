//! SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677) as mongod speaks them over
//! `saslStart`/`saslContinue`: the server side of the exchange, and the credentials stored
//! per user (salted keys only, never the password).
//!
//! SCRAM-SHA-1's password is mongod's digest `hex(MD5(user + ":mongo:" + password))`;
//! SCRAM-SHA-256's is the SASLprep'd password. The primitives are the `sha1`, `sha2`, `md-5`,
//! `hmac` and `pbkdf2` crates.

use base64::Engine as _;
use bson::{doc, spec::BinarySubtype, Binary, Document};
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }
    pub fn parse(s: &str) -> Option<Mechanism> {
        match s {
            "SCRAM-SHA-1" => Some(Mechanism::Sha1),
            "SCRAM-SHA-256" => Some(Mechanism::Sha256),
            _ => None,
        }
    }
    /// mongod's default iteration counts (scramIterationCount, scramSHA256IterationCount).
    fn iterations(self) -> u32 {
        match self {
            Mechanism::Sha1 => 10_000,
            Mechanism::Sha256 => 15_000,
        }
    }
    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut m = <Hmac<Sha1> as KeyInit>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha256 => {
                let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut out = [0u8; 20];
                pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Mechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }
    /// The password as this mechanism hashes it.
    fn password_input(self, user: &str, password: &str) -> Result<String, String> {
        match self {
            Mechanism::Sha1 => {
                let d = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
                Ok(d.iter().map(|b| format!("{b:02x}")).collect())
            }
            Mechanism::Sha256 => stringprep::saslprep(password)
                .map(|p| p.into_owned())
                .map_err(|e| format!("password cannot be SASLprep'd: {e}")),
        }
    }
}

/// One mechanism's stored credentials (mongod's `credentials.SCRAM-SHA-*` shape).
#[derive(Clone, Debug, PartialEq)]
pub struct Credential {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credential {
    /// Salts and derives the keys for a new password.
    pub fn derive(mech: Mechanism, user: &str, password: &str) -> Result<Credential, String> {
        let salt: [u8; 16] = rand::random();
        let pw = mech.password_input(user, password)?;
        let salted = mech.salted_password(pw.as_bytes(), &salt, mech.iterations());
        let client_key = mech.hmac(&salted, b"Client Key");
        Ok(Credential {
            iterations: mech.iterations(),
            salt: salt.to_vec(),
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(&salted, b"Server Key"),
        })
    }

    pub fn to_doc(&self) -> Document {
        doc! {
            "iterationCount": self.iterations as i32,
            "salt": B64.encode(&self.salt),
            "storedKey": B64.encode(&self.stored_key),
            "serverKey": B64.encode(&self.server_key),
        }
    }

    pub fn from_doc(d: &Document) -> Option<Credential> {
        let b = |k: &str| B64.decode(d.get_str(k).ok()?).ok();
        Some(Credential {
            iterations: u32::try_from(d.get_i32("iterationCount").ok()?).ok()?,
            salt: b("salt")?,
            stored_key: b("storedKey")?,
            server_key: b("serverKey")?,
        })
    }
}

/// A conversation in progress: after the client-first message, waiting for the client-final.
#[derive(Clone, Debug)]
pub struct Conversation {
    pub mech: Mechanism,
    pub user: String,
    pub db: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    cred: Credential,
    /// The proof was checked; waiting for the client's empty last step (no skipEmptyExchange).
    pub verified: bool,
}

/// The username in a client-first message (`n,,n=user,r=nonce`), unescaped.
pub fn client_first_user(payload: &[u8]) -> Result<String, String> {
    let msg = std::str::from_utf8(payload).map_err(|_| "SCRAM message is not UTF-8".to_string())?;
    let bare = bare_of(msg)?;
    let (user, _) = parse_first_bare(bare)?;
    Ok(user)
}

fn bare_of(msg: &str) -> Result<&str, String> {
    // gs2-header: "n,," or "y,," or "n,a=authzid,"; channel binding ("p=") is refused.
    let mut parts = msg.splitn(3, ',');
    let cb = parts.next().unwrap_or("");
    if cb.starts_with('p') {
        return Err("SCRAM channel binding is not supported".into());
    }
    if cb != "n" && cb != "y" {
        return Err("invalid SCRAM gs2 header".into());
    }
    let _authzid = parts.next().ok_or("invalid SCRAM gs2 header")?;
    parts
        .next()
        .ok_or_else(|| "invalid SCRAM client-first message".into())
}

fn parse_first_bare(bare: &str) -> Result<(String, String), String> {
    let mut user = None;
    let mut nonce = None;
    for attr in bare.split(',') {
        if let Some(u) = attr.strip_prefix("n=") {
            user = Some(u.replace("=2C", ",").replace("=3D", "="));
        } else if let Some(r) = attr.strip_prefix("r=") {
            nonce = Some(r.to_string());
        } else if attr.starts_with("m=") {
            return Err("SCRAM extensions are not supported".into());
        }
    }
    match (user, nonce) {
        (Some(u), Some(n)) if !n.is_empty() => Ok((u, n)),
        _ => Err("invalid SCRAM client-first message".into()),
    }
}

impl Conversation {
    /// Handles the client-first message; returns the conversation and the server-first
    /// message.
    pub fn start(
        mech: Mechanism,
        db: &str,
        payload: &[u8],
        cred: Credential,
    ) -> Result<(Conversation, Vec<u8>), String> {
        let msg =
            std::str::from_utf8(payload).map_err(|_| "SCRAM message is not UTF-8".to_string())?;
        let bare = bare_of(msg)?;
        let (user, client_nonce) = parse_first_bare(bare)?;
        let server_nonce: [u8; 24] = rand::random();
        let nonce = format!("{client_nonce}{}", B64.encode(server_nonce));
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&cred.salt),
            cred.iterations
        );
        let out = server_first.clone().into_bytes();
        Ok((
            Conversation {
                mech,
                user,
                db: db.to_string(),
                client_first_bare: bare.to_string(),
                server_first,
                nonce,
                cred,
                verified: false,
            },
            out,
        ))
    }

    /// Handles the client-final message: checks the proof; returns the server-final message.
    pub fn finish(&mut self, payload: &[u8]) -> Result<Vec<u8>, String> {
        let msg =
            std::str::from_utf8(payload).map_err(|_| "SCRAM message is not UTF-8".to_string())?;
        let (without_proof, proof) = msg
            .rsplit_once(",p=")
            .ok_or("invalid SCRAM client-final message")?;
        let mut nonce_ok = false;
        for attr in without_proof.split(',') {
            if let Some(r) = attr.strip_prefix("r=") {
                nonce_ok = r == self.nonce;
            }
        }
        if !nonce_ok {
            return Err("SCRAM nonce mismatch".into());
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| "invalid SCRAM proof encoding")?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let m = self.mech;
        let client_sig = m.hmac(&self.cred.stored_key, auth_message.as_bytes());
        if proof.len() != client_sig.len() {
            return Err("Authentication failed.".into());
        }
        let client_key: Vec<u8> = proof.iter().zip(&client_sig).map(|(a, b)| a ^ b).collect();
        // In constant time (the `subtle` crate): how long the comparison takes says nothing
        // of how much of the proof was right.
        if !bool::from(m.hash(&client_key).ct_eq(&self.cred.stored_key)) {
            return Err("Authentication failed.".into());
        }
        self.verified = true;
        let server_sig = m.hmac(&self.cred.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_sig)).into_bytes())
    }
}

pub fn bin(bytes: Vec<u8>) -> Binary {
    Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plays the client side by hand (RFC 5802) against the server side.
    fn client_exchange(mech: Mechanism, user: &str, stored: &str, given: &str) -> bool {
        let cred = Credential::derive(mech, user, stored).unwrap();
        let first = format!("n,,n={user},r=clientnonce");
        let (mut conv, server_first) =
            Conversation::start(mech, "admin", first.as_bytes(), cred).unwrap();
        let sf = String::from_utf8(server_first).unwrap();
        let mut r = "";
        let mut s = String::new();
        let mut i = 0u32;
        for a in sf.split(',') {
            if let Some(v) = a.strip_prefix("r=") {
                r = v;
            } else if let Some(v) = a.strip_prefix("s=") {
                s = v.to_string();
            } else if let Some(v) = a.strip_prefix("i=") {
                i = v.parse().unwrap();
            }
        }
        let pw = mech.password_input(user, given).unwrap();
        let salted = mech.salted_password(pw.as_bytes(), &B64.decode(s).unwrap(), i);
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored_key = mech.hash(&client_key);
        let without_proof = format!("c=biws,r={r}");
        let auth = format!("n={user},r=clientnonce,{sf},{without_proof}");
        let sig = mech.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let last = format!("{without_proof},p={}", B64.encode(proof));
        match conv.finish(last.as_bytes()) {
            Ok(v) => {
                let server_key = mech.hmac(&salted, b"Server Key");
                let want = B64.encode(mech.hmac(&server_key, auth.as_bytes()));
                assert_eq!(String::from_utf8(v).unwrap(), format!("v={want}"));
                true
            }
            Err(_) => false,
        }
    }

    #[test]
    fn both_mechanisms_accept_the_right_password_only() {
        for m in [Mechanism::Sha1, Mechanism::Sha256] {
            assert!(client_exchange(m, "ann", "secret", "secret"));
            assert!(!client_exchange(m, "ann", "secret", "Secret"));
        }
    }

    #[test]
    fn sha1_digest_and_saslprep() {
        // mongod's SCRAM-SHA-1 password digest.
        assert_eq!(
            Mechanism::Sha1.password_input("user", "pencil").unwrap(),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
        // SASLprep maps the non-ASCII space to a space (RFC 4013).
        assert_eq!(
            Mechanism::Sha256.password_input("u", "a\u{00A0}b").unwrap(),
            "a b"
        );
        let c = Credential::derive(Mechanism::Sha256, "u", "p").unwrap();
        assert_eq!(Credential::from_doc(&c.to_doc()), Some(c));
        assert!(client_first_user(b"n,,n=a=2Cb,r=x").unwrap() == "a,b");
        assert!(client_first_user(b"p=tls,,n=a,r=x").is_err());
    }
}
