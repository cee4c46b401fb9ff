//! What the environment plugins share and the ABI does not carry: the table of open episodes
//! ([`EpisodeTable`]) and reading blocks out of the agent's text ([`blocks`]).

use openclaw_plugin_api::PluginResult;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The open episodes of an environment, by id: ids count up from 1 and are never reused, each
/// episode behind its own lock so episodes step in parallel.
pub struct EpisodeTable<E> {
    episodes: Mutex<HashMap<u64, Arc<Mutex<E>>>>,
    next_id: AtomicU64,
}

impl<E> Default for EpisodeTable<E> {
    fn default() -> Self {
        EpisodeTable {
            episodes: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }
}

impl<E> EpisodeTable<E> {
    /// Opens `episode` under a new id.
    pub fn open(&self, episode: E) -> PluginResult<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.episodes
            .lock()
            .map_err(|e| e.to_string())?
            .insert(id, Arc::new(Mutex::new(episode)));
        Ok(id)
    }

    /// The open episode `id`.
    pub fn get(&self, id: u64) -> PluginResult<Arc<Mutex<E>>> {
        self.episodes
            .lock()
            .map_err(|e| e.to_string())?
            .get(&id)
            .cloned()
            .ok_or_else(|| format!("no episode {id} (never started, or closed)"))
    }

    /// Takes episode `id` out of the table (none when it was not open); the caller drops it
    /// outside the table's lock, so removing its work directory holds no other episode up.
    pub fn close(&self, id: u64) -> PluginResult<Option<Arc<Mutex<E>>>> {
        Ok(self.episodes.lock().map_err(|e| e.to_string())?.remove(&id))
    }
}

/// The texts between each `open` and the next `close` (an unclosed block runs to the end).
pub fn blocks<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        let body = &rest[at + open.len()..];
        match body.find(close) {
            Some(end) => {
                out.push(&body[..end]);
                rest = &body[end + close.len()..];
            }
            None => {
                out.push(body);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_and_a_closed_episode_is_gone() {
        let t = EpisodeTable::default();
        let a = t.open("a").unwrap();
        let b = t.open("b").unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(*t.get(b).unwrap().lock().unwrap(), "b");
        assert!(t.close(a).unwrap().is_some());
        assert!(t.close(a).unwrap().is_none());
        let e = t.get(a).err().unwrap();
        assert_eq!(e, "no episode 1 (never started, or closed)");
        assert_eq!(t.open("c").unwrap(), 3, "ids are never reused");
    }

    #[test]
    fn blocks_run_to_their_close_or_to_the_end() {
        assert_eq!(blocks("x<a>1</a>y<a>2</a>", "<a>", "</a>"), ["1", "2"]);
        assert_eq!(blocks("<a>1</a><a>open", "<a>", "</a>"), ["1", "open"]);
        assert!(blocks("nothing", "<a>", "</a>").is_empty());
    }
}
