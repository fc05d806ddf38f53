//! "Did you mean": the known name closest to a mistyped one, as a refusal of an unknown
//! namespace suggests it. Pure and deterministic (the state machine calls it when it applies a
//! write): ties go to the candidate that comes first.

/// The candidate closest to `name` by edit distance (a swap of two neighbouring characters counts
/// as one edit), if one is close enough to be a likely typo: at most one edit for names of up to 4
/// characters, two up to 8, three beyond. `name` itself is never suggested.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let length = name.chars().count();
    let allowed = match length {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    };
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        if candidate == name {
            continue;
        }
        let distance = edit_distance(name, candidate);
        if distance <= allowed && best.is_none_or(|(best_distance, _)| distance < best_distance) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbouring characters, each one edit.
fn edit_distance(left: &str, right: &str) -> usize {
    let left: Vec<char> = left.chars().collect();
    let right: Vec<char> = right.chars().collect();
    let width = right.len() + 1;
    // Three rows of the distance table: the one before the previous, the previous, the current.
    let mut before: Vec<usize> = vec![0; width];
    let mut previous: Vec<usize> = (0..width).collect();
    let mut current: Vec<usize> = vec![0; width];
    for i in 1..=left.len() {
        current[0] = i;
        for j in 1..width {
            let cost = usize::from(left[i - 1] != right[j - 1]);
            let mut distance = (previous[j] + 1).min(current[j - 1] + 1).min(previous[j - 1] + cost);
            if i > 1 && j > 1 && left[i - 1] == right[j - 2] && left[i - 2] == right[j - 1] {
                distance = distance.min(before[j - 2] + 1);
            }
            current[j] = distance;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[right.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_are_counted_with_a_swap_as_one() {
        assert_eq!(edit_distance("default", "default"), 0);
        assert_eq!(edit_distance("defualt", "default"), 1);
        assert_eq!(edit_distance("defaul", "default"), 1);
        assert_eq!(edit_distance("rig", "rigs"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_likely_typo_is_suggested_and_a_stranger_is_not() {
        let names = ["default", "rig-frontend", "ops"];
        assert_eq!(closest("defualt", names), Some("default"));
        assert_eq!(closest("rig-frontnd", names), Some("rig-frontend"));
        assert_eq!(closest("opz", names), Some("ops"));
        assert_eq!(closest("billing", names), None);
        assert_eq!(closest("xy", names), None);
        assert_eq!(closest("default", ["default"]), None, "a name is never its own suggestion");
    }

    #[test]
    fn the_nearest_wins_and_ties_go_to_the_first() {
        assert_eq!(closest("rigs", ["rig", "rigs2", "rigz"]), Some("rig"));
        assert_eq!(closest("ab", ["aa", "bb"]), Some("aa"));
    }
}
