//! Packing sequences into micro-batches under a token budget, and laying a micro-batch out as
//! right-padded token rows plus the flat positions whose next-token logprobs are trained.

/// The samples of one micro-batch, as indices into the step's sample list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicroBatch {
    /// Sample indices, in the order their tokens appear in the loss batch.
    pub samples: Vec<usize>,
    /// Padded row length: the longest member.
    pub width: usize,
}

/// The result of packing one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packing {
    /// The micro-batches, each within the budget unless a single sample exceeds it.
    pub micro_batches: Vec<MicroBatch>,
    /// Groups whose samples ended up in more than one micro-batch (their group statistics are
    /// then computed per part by losses that derive advantages from rewards).
    pub split_groups: usize,
}

/// Packs sequences of `lengths` (prompt + response tokens) into micro-batches whose padded size
/// `samples × longest` stays within `max_tokens`. Samples of one group are kept together, in
/// the order groups first appear, so that group-relative losses see whole groups; a group that
/// alone exceeds the budget is split, and a sample that alone exceeds it trains by itself.
pub fn pack(lengths: &[usize], groups: &[u64], max_tokens: usize) -> Packing {
    assert_eq!(lengths.len(), groups.len(), "one group id per sample");
    let max_tokens = max_tokens.max(1);
    // Groups in order of first appearance, members in sample order.
    let mut order: Vec<(u64, Vec<usize>)> = Vec::new();
    for (i, &g) in groups.iter().enumerate() {
        match order.iter_mut().find(|(id, _)| *id == g) {
            Some((_, members)) => members.push(i),
            None => order.push((g, vec![i])),
        }
    }
    let mut out: Vec<MicroBatch> = Vec::new();
    let mut cur = MicroBatch {
        samples: Vec::new(),
        width: 0,
    };
    let mut split_groups = 0;
    let fits = |mb: &MicroBatch, extra: usize, w: usize| {
        (mb.samples.len() + extra) * mb.width.max(w) <= max_tokens
    };
    for (_, members) in order {
        let gw = members.iter().map(|&i| lengths[i]).max().unwrap_or(0);
        if fits(&cur, members.len(), gw) {
            cur.samples.extend(&members);
            cur.width = cur.width.max(gw);
            continue;
        }
        let alone = MicroBatch {
            samples: Vec::new(),
            width: 0,
        };
        if fits(&alone, members.len(), gw) {
            if !cur.samples.is_empty() {
                out.push(std::mem::replace(&mut cur, alone));
            }
            cur.samples.extend(&members);
            cur.width = gw;
            continue;
        }
        // The group cannot fit whole anywhere: fill sample by sample. A micro-batch's index
        // is `out.len()` while it is being filled.
        let mut first = None;
        for i in members {
            if !cur.samples.is_empty() && !fits(&cur, 1, lengths[i]) {
                let empty = MicroBatch {
                    samples: Vec::new(),
                    width: 0,
                };
                out.push(std::mem::replace(&mut cur, empty));
            }
            cur.samples.push(i);
            cur.width = cur.width.max(lengths[i]);
            first.get_or_insert(out.len());
        }
        if first != Some(out.len()) {
            split_groups += 1;
        }
    }
    if !cur.samples.is_empty() {
        out.push(cur);
    }
    Packing {
        micro_batches: out,
        split_groups,
    }
}

/// One sequence of a micro-batch: its tokens and the positions whose tokens are trained (each
/// predicted from the position before it, so every position is at least 1).
#[derive(Clone, Debug)]
pub struct SeqRef<'a> {
    /// The token ids (prompt then response).
    pub tokens: Vec<&'a [u32]>,
    /// Positions in the concatenated tokens whose token is a training target.
    pub targets: Vec<usize>,
}

/// A micro-batch ready for the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Rows.
    pub batch: usize,
    /// Row length (right padding with token 0 after each sequence; causal attention keeps the
    /// padding invisible to real positions).
    pub width: usize,
    /// Token ids, `[batch * width]`.
    pub ids: Vec<i64>,
    /// For each target, the flat index `row * width + position - 1` of the hidden state that
    /// predicts it; targets of sequence `i` are `offsets[i]..offsets[i + 1]`.
    pub rows: Vec<i64>,
    /// The target token ids, aligned with `rows`.
    pub targets: Vec<i64>,
    /// `batch + 1` offsets into `rows` / `targets`.
    pub offsets: Vec<u32>,
    /// Real (unpadded) tokens.
    pub real_tokens: usize,
}

impl Layout {
    /// Lays out `seqs`, one row each.
    ///
    /// # Panics
    /// When a target position is 0 or beyond its sequence.
    pub fn new(seqs: &[SeqRef<'_>]) -> Self {
        let lens: Vec<usize> = seqs
            .iter()
            .map(|s| s.tokens.iter().map(|t| t.len()).sum())
            .collect();
        let width = lens.iter().copied().max().unwrap_or(0).max(1);
        let batch = seqs.len();
        let mut ids = vec![0i64; batch * width];
        let mut rows = Vec::new();
        let mut targets = Vec::new();
        let mut offsets = vec![0u32];
        for (r, s) in seqs.iter().enumerate() {
            let row = &mut ids[r * width..(r + 1) * width];
            let mut j = 0;
            for part in &s.tokens {
                for &t in *part {
                    row[j] = t as i64;
                    j += 1;
                }
            }
            for &p in &s.targets {
                assert!(
                    p >= 1 && p < lens[r],
                    "target position {p} of a {}-token sequence",
                    lens[r]
                );
                rows.push((r * width + p - 1) as i64);
                targets.push(row[p]);
            }
            offsets.push(rows.len() as u32);
        }
        Layout {
            batch,
            width,
            ids,
            rows,
            targets,
            offsets,
            real_tokens: lens.iter().sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_stay_together_within_the_budget() {
        // Groups 7 (samples 0, 2) and 9 (1, 3); budget 2 × 10.
        let p = pack(&[10, 4, 8, 6], &[7, 9, 7, 9], 20);
        assert_eq!(p.micro_batches.len(), 2);
        assert_eq!(p.micro_batches[0].samples, vec![0, 2]);
        assert_eq!(p.micro_batches[0].width, 10);
        assert_eq!(p.micro_batches[1].samples, vec![1, 3]);
        assert_eq!(p.split_groups, 0);
    }

    #[test]
    fn an_oversized_group_is_split_and_counted() {
        let p = pack(&[5, 5, 5, 5, 5], &[1, 1, 1, 1, 2], 10);
        let all: Vec<Vec<usize>> = p.micro_batches.iter().map(|m| m.samples.clone()).collect();
        assert_eq!(all, vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(p.split_groups, 1);
        for m in &p.micro_batches {
            assert!(m.samples.len() * m.width <= 10);
        }
    }

    #[test]
    fn a_sample_over_the_budget_trains_alone() {
        let p = pack(&[3, 50, 3], &[0, 1, 2], 10);
        let all: Vec<Vec<usize>> = p.micro_batches.iter().map(|m| m.samples.clone()).collect();
        assert_eq!(all, vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn layout_points_each_target_at_the_position_before_it() {
        let (p0, r0) = ([5u32, 6], [7u32, 8, 9]);
        let (p1, r1) = ([1u32], [2u32]);
        let l = Layout::new(&[
            SeqRef {
                tokens: vec![&p0, &r0],
                targets: vec![2, 3, 4],
            },
            SeqRef {
                tokens: vec![&p1, &r1],
                targets: vec![1],
            },
        ]);
        assert_eq!((l.batch, l.width), (2, 5));
        assert_eq!(l.ids, vec![5, 6, 7, 8, 9, 1, 2, 0, 0, 0]);
        assert_eq!(l.rows, vec![1, 2, 3, 5]);
        assert_eq!(l.targets, vec![7, 8, 9, 2]);
        assert_eq!(l.offsets, vec![0, 3, 4]);
        assert_eq!(l.real_tokens, 7);
    }
}
