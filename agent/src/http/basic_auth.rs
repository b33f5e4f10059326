//! HTTP basic authentication against the bcrypt hashes of the web config's
//! `basic_auth_users`, as exporter-toolkit does it.
//!
//! * An unknown user is checked against [`FAKE_BCRYPT_HASH`], so it takes as long as a
//!   known one and user names cannot be probed by timing.
//! * bcrypt is slow on purpose (cost 10 is some 70 ms), so each verdict is cached, keyed by
//!   the SHA-256 of user, hash and password (the password itself is never stored), in a
//!   bounded [`VerdictCache`]: a scrape every few seconds costs one bcrypt per password
//!   change, not one per scrape.
//! * bcrypt runs on a blocking thread, one at a time (a semaphore of 1): a storm of wrong
//!   passwords queues there instead of taking every core.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::http::HeaderValue;
use base64::Engine;
use tokio::sync::Semaphore;

use crate::http::web_config::FAKE_BCRYPT_HASH;

/// The most verdicts kept; when full, one arbitrary entry makes room.
pub(crate) const CACHE_CAPACITY: usize = 1024;

/// Verdicts by SHA-256 of (user, hash, password).
#[derive(Debug, Default)]
pub(crate) struct VerdictCache {
    verdicts: Mutex<HashMap<[u8; 32], bool>>,
}

impl VerdictCache {
    fn get(&self, key: &[u8; 32]) -> Option<bool> {
        self.lock().get(key).copied()
    }

    fn insert(&self, key: [u8; 32], verdict: bool) {
        let mut verdicts = self.lock();
        if verdicts.len() >= CACHE_CAPACITY
            && !verdicts.contains_key(&key)
            && let Some(evict) = verdicts.keys().next().copied()
        {
            verdicts.remove(&evict);
        }
        verdicts.insert(key, verdict);
    }

    /// How many verdicts are cached (for the tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], bool>> {
        match self.verdicts.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

/// Checks `Authorization` headers.
#[derive(Debug)]
pub(crate) struct BasicAuth {
    cache: VerdictCache,
    bcrypt: Arc<Semaphore>,
}

impl Default for BasicAuth {
    fn default() -> Self {
        BasicAuth {
            cache: VerdictCache::default(),
            bcrypt: Arc::new(Semaphore::new(1)),
        }
    }
}

/// User and password from a `Basic` authorization header.
pub(crate) fn parse_header(header: &HeaderValue) -> Option<(String, Vec<u8>)> {
    let text = header.to_str().ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

fn cache_key(user: &str, hash: &str, password: &[u8]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [user.as_bytes(), hash.as_bytes(), password] {
        // Length-prefixed, so that no two (user, hash, password) triples share a key.
        ctx.update(&(part.len() as u64).to_le_bytes());
        ctx.update(part);
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(ctx.finish().as_ref());
    key
}

impl BasicAuth {
    /// The cached verdicts (for the tests).
    #[cfg(test)]
    fn cache(&self) -> &VerdictCache {
        &self.cache
    }

    /// Whether `header` holds the password of one of `users`.
    pub(crate) async fn check(
        &self,
        users: &BTreeMap<String, String>,
        header: Option<&HeaderValue>,
    ) -> bool {
        let Some((user, password)) = header.and_then(parse_header) else {
            return false;
        };
        let (hash, known) = match users.get(&user) {
            Some(hash) => (hash.clone(), true),
            None => (FAKE_BCRYPT_HASH.to_owned(), false),
        };
        let key = cache_key(&user, &hash, &password);
        if let Some(verdict) = self.cache.get(&key) {
            return verdict && known;
        }
        let Ok(permit) = Arc::clone(&self.bcrypt).acquire_owned().await else {
            return false;
        };
        // The permit moves into the blocking task: a request that gives up waiting does not
        // let a second bcrypt start beside one still running.
        let matched = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            bcrypt::verify(&password, &hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        let verdict = matched && known;
        self.cache.insert(key, verdict);
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> HeaderValue {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap()
    }

    #[test]
    fn header_parsing() {
        assert_eq!(
            parse_header(&basic("alice", "pa:ss")),
            Some(("alice".to_owned(), b"pa:ss".to_vec()))
        );
        assert_eq!(parse_header(&HeaderValue::from_static("Bearer abc")), None);
        assert_eq!(parse_header(&HeaderValue::from_static("Basic !!!")), None);
        assert_eq!(
            parse_header(&HeaderValue::from_static("Basic YWxpY2U=")),
            None
        );
    }

    #[test]
    fn cache_keys_do_not_collide_across_fields() {
        assert_ne!(cache_key("ab", "c", b"d"), cache_key("a", "bc", b"d"));
        assert_ne!(cache_key("a", "b", b"cd"), cache_key("a", "bc", b"d"));
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = VerdictCache::default();
        for i in 0..CACHE_CAPACITY + 10 {
            cache.insert(cache_key("u", "h", i.to_string().as_bytes()), false);
        }
        assert_eq!(cache.len(), CACHE_CAPACITY);
    }

    #[tokio::test]
    async fn verdicts() {
        let hash = bcrypt::hash("secret", 4).unwrap();
        let users = BTreeMap::from([("alice".to_owned(), hash)]);
        let auth = BasicAuth::default();
        assert!(auth.check(&users, Some(&basic("alice", "secret"))).await);
        assert!(!auth.check(&users, Some(&basic("alice", "wrong"))).await);
        assert!(!auth.check(&users, Some(&basic("bob", "secret"))).await);
        // The fake hash's own password does not let an unknown user in.
        assert!(
            !auth
                .check(&users, Some(&basic("bob", "fakepassword")))
                .await
        );
        assert!(!auth.check(&users, None).await);
        assert_eq!(auth.cache().len(), 4);
        // Cached verdicts answer the same.
        assert!(auth.check(&users, Some(&basic("alice", "secret"))).await);
        assert!(!auth.check(&users, Some(&basic("alice", "wrong"))).await);
        assert_eq!(auth.cache().len(), 4);
    }
}
