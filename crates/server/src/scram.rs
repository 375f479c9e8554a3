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

/// The client side of one exchange (RFC 5802), as a cluster member runs it to authenticate to
/// another with the internal user's key: the client-first message, then the client-final
/// message with the proof, then the server's signature checked.
pub struct ClientConversation {
    mech: Mechanism,
    password: String,
    client_nonce: String,
    client_first_bare: String,
    /// The server's signature the client expects (after the client-final message).
    expected_server_signature: Option<Vec<u8>>,
}

impl ClientConversation {
    /// Starts an exchange as `user` with `password`; returns the client-first message.
    pub fn start(
        mech: Mechanism,
        user: &str,
        password: &str,
    ) -> Result<(ClientConversation, Vec<u8>), String> {
        let nonce: [u8; 24] = rand::random();
        let client_nonce = B64.encode(nonce);
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={escaped},r={client_nonce}");
        let first = format!("n,,{client_first_bare}").into_bytes();
        Ok((
            ClientConversation {
                mech,
                password: mech.password_input(user, password)?,
                client_nonce,
                client_first_bare,
                expected_server_signature: None,
            },
            first,
        ))
    }

    /// Answers the server-first message with the client-final message (the proof).
    pub fn finish(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let sf = std::str::from_utf8(server_first)
            .map_err(|_| "SCRAM server-first message is not UTF-8".to_string())?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in sf.split(',') {
            if let Some(v) = attr.strip_prefix("r=") {
                nonce = Some(v);
            } else if let Some(v) = attr.strip_prefix("s=") {
                salt = B64.decode(v).ok();
            } else if let Some(v) = attr.strip_prefix("i=") {
                iterations = v.parse::<u32>().ok();
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err("invalid SCRAM server-first message".into());
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("SCRAM server nonce does not extend the client's".into());
        }
        // mongod's floor for either mechanism: fewer would make the proof cheap to attack.
        if iterations < 4096 {
            return Err(format!("SCRAM iteration count {iterations} is too low"));
        }
        let m = self.mech;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{sf},{without_proof}", self.client_first_bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(m.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it knows the key too.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), String> {
        let expected = self
            .expected_server_signature
            .as_ref()
            .ok_or("SCRAM server-final message before the client-final one")?;
        let got = std::str::from_utf8(server_final)
            .ok()
            .and_then(|s| s.strip_prefix("v="))
            .and_then(|v| B64.decode(v).ok())
            .ok_or("invalid SCRAM server-final message")?;
        if bool::from(got.ct_eq(expected)) {
            Ok(())
        } else {
            Err("the server's SCRAM signature is wrong: it does not hold the same key".into())
        }
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
    fn the_client_side_authenticates_against_the_server_side() {
        for m in [Mechanism::Sha1, Mechanism::Sha256] {
            for (stored, given, ok) in [("k3yk3y", "k3yk3y", true), ("k3yk3y", "other1", false)] {
                let cred = Credential::derive(m, "__sys,tem", stored).unwrap();
                let (mut client, first) = ClientConversation::start(m, "__sys,tem", given).unwrap();
                assert_eq!(client_first_user(&first).unwrap(), "__sys,tem");
                let (mut conv, server_first) =
                    Conversation::start(m, "local", &first, cred.clone()).unwrap();
                let last = client.finish(&server_first).unwrap();
                match conv.finish(&last) {
                    Ok(server_final) => {
                        assert!(ok);
                        client.verify(&server_final).unwrap();
                        // A server that does not hold the key cannot sign for it.
                        assert!(client.verify(b"v=AAAA").is_err());
                    }
                    Err(_) => assert!(!ok),
                }
            }
        }
    }

    #[test]
    fn the_client_refuses_a_server_that_does_not_extend_its_nonce() {
        let (mut client, _) = ClientConversation::start(Mechanism::Sha256, "u", "pass12").unwrap();
        assert!(client.finish(b"r=other,s=c2FsdA==,i=15000").is_err());
        assert!(client.verify(b"v=AAAA").is_err());
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
