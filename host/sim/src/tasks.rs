//! The tasks: five kinds of simple request, each from templates with slots, split into a
//! training set and a held-out evaluation set that training never sees.

use serde::{Deserialize, Serialize};

/// What kind of request a task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// Describe an animal.
    Animal,
    /// Give tips on a topic.
    Tips,
    /// Add or multiply two digits.
    Arithmetic,
    /// Explain a concept.
    Concept,
    /// Name items of a category.
    Category,
}

/// One request with what an answer must mention to be on topic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// The kind.
    pub kind: TaskKind,
    /// The user's message.
    pub prompt: String,
    /// The slot: the animal, topic, concept or category (for arithmetic, the expression).
    pub subject: String,
    /// What an on-topic answer contains: the subject word, or the correct result.
    pub must_mention: String,
}

/// Facts about an animal: where it lives, what it eats, what it is known for.
pub(crate) const ANIMALS: [(&str, &str, &str, &str); 24] = [
    (
        "shark",
        "in the sea",
        "fish and seals",
        "being a fast swimmer",
    ),
    (
        "lion",
        "on the savanna",
        "zebras and antelopes",
        "living in prides",
    ),
    (
        "penguin",
        "near the South Pole",
        "fish and krill",
        "swimming instead of flying",
    ),
    ("owl", "in forests", "mice and insects", "hunting at night"),
    (
        "camel",
        "in the desert",
        "dry plants",
        "going days without water",
    ),
    (
        "dolphin",
        "in the ocean",
        "fish and squid",
        "being playful and clever",
    ),
    (
        "eagle",
        "in the mountains",
        "rabbits and fish",
        "its sharp eyesight",
    ),
    ("frog", "near ponds", "insects", "its long sticky tongue"),
    (
        "elephant",
        "in grasslands",
        "grass and fruit",
        "its long trunk",
    ),
    ("bee", "in hives", "nectar and pollen", "making honey"),
    ("wolf", "in forests", "deer and rabbits", "hunting in packs"),
    (
        "koala",
        "in eucalyptus forests",
        "eucalyptus leaves",
        "sleeping most of the day",
    ),
    (
        "octopus",
        "on the sea floor",
        "crabs and clams",
        "having eight arms",
    ),
    (
        "horse",
        "on farms and plains",
        "grass and hay",
        "running fast",
    ),
    ("bat", "in caves", "insects and fruit", "flying in the dark"),
    (
        "turtle",
        "in rivers and seas",
        "plants and jellyfish",
        "its hard shell",
    ),
    (
        "giraffe",
        "on the savanna",
        "acacia leaves",
        "its very long neck",
    ),
    (
        "panda",
        "in bamboo forests",
        "bamboo",
        "its black and white fur",
    ),
    (
        "fox",
        "in woods and towns",
        "small animals and berries",
        "being sly",
    ),
    (
        "whale",
        "in the open ocean",
        "krill and small fish",
        "its huge size",
    ),
    (
        "snake",
        "in grass and deserts",
        "mice and eggs",
        "moving without legs",
    ),
    (
        "parrot",
        "in tropical forests",
        "seeds and fruit",
        "copying sounds",
    ),
    ("rabbit", "in meadows", "grass and carrots", "its long ears"),
    (
        "crocodile",
        "in rivers",
        "fish and birds",
        "its powerful jaws",
    ),
];

/// Tips per topic (three each).
pub(crate) const TIPS: [(&str, [&str; 3]); 12] = [
    (
        "sleep",
        [
            "go to bed at the same time",
            "keep the room dark",
            "avoid screens late at night",
        ],
    ),
    (
        "studying",
        [
            "study in short sessions",
            "test yourself often",
            "remove distractions",
        ],
    ),
    (
        "running",
        ["start slowly", "wear good shoes", "rest between runs"],
    ),
    (
        "cooking",
        [
            "read the recipe first",
            "prepare everything before you start",
            "taste as you go",
        ],
    ),
    (
        "saving money",
        ["make a budget", "cook at home", "wait a day before buying"],
    ),
    (
        "gardening",
        [
            "water in the morning",
            "choose plants for your light",
            "add compost to the soil",
        ],
    ),
    (
        "writing",
        [
            "write a short outline",
            "use simple words",
            "read it aloud before you finish",
        ],
    ),
    (
        "focus",
        [
            "work on one thing at a time",
            "take short breaks",
            "turn off notifications",
        ],
    ),
    (
        "travel",
        [
            "pack light",
            "keep copies of documents",
            "learn a few local words",
        ],
    ),
    (
        "public speaking",
        [
            "practice out loud",
            "know your first sentence",
            "speak slowly",
        ],
    ),
    (
        "staying healthy",
        ["drink enough water", "walk every day", "eat vegetables"],
    ),
    (
        "learning a language",
        [
            "practice every day",
            "listen to native speakers",
            "learn common words first",
        ],
    ),
];

/// Concepts with a one-line explanation and a second fact.
pub(crate) const CONCEPTS: [(&str, &str, &str); 12] = [
    (
        "gravity",
        "the force that pulls objects toward each other",
        "it keeps the planets moving around the sun",
    ),
    (
        "photosynthesis",
        "how plants turn sunlight into food",
        "it releases oxygen into the air",
    ),
    (
        "democracy",
        "a system where people choose their leaders by voting",
        "it depends on free elections",
    ),
    (
        "evaporation",
        "when a liquid turns into a gas",
        "it happens faster when it is warm",
    ),
    (
        "inflation",
        "when prices rise over time",
        "it makes money buy less",
    ),
    (
        "recycling",
        "turning used materials into new products",
        "it saves resources and energy",
    ),
    (
        "friction",
        "the force that slows things that rub together",
        "it turns motion into heat",
    ),
    (
        "electricity",
        "the flow of electric charge",
        "it powers lights and machines",
    ),
    (
        "erosion",
        "the slow wearing away of rock and soil",
        "wind and water cause it",
    ),
    (
        "vaccination",
        "training the body to fight a disease",
        "it protects people before they get sick",
    ),
    (
        "the internet",
        "a network that connects computers around the world",
        "it lets people share information",
    ),
    (
        "climate",
        "the usual weather of a place over many years",
        "it differs from daily weather",
    ),
];

/// Categories with items (three are named per answer).
pub(crate) const CATEGORIES: [(&str, [&str; 4]); 8] = [
    ("fruits", ["apple", "banana", "cherry", "mango"]),
    ("colors", ["red", "blue", "green", "yellow"]),
    ("planets", ["Mars", "Venus", "Jupiter", "Saturn"]),
    ("instruments", ["piano", "guitar", "violin", "drum"]),
    ("vegetables", ["carrot", "potato", "onion", "pea"]),
    ("sports", ["soccer", "tennis", "swimming", "basketball"]),
    ("birds", ["robin", "crow", "sparrow", "eagle"]),
    ("metals", ["iron", "gold", "copper", "silver"]),
];

const ANIMAL_PHRASES: [&str; 5] = [
    "Tell me about the {}.",
    "Describe the {}.",
    "What is a {} like?",
    "Can you describe a {} for me?",
    "Write a short description of the {}.",
];
const TIP_PHRASES: [&str; 4] = [
    "Give me some tips for {}.",
    "How can I get better at {}?",
    "What are good tips for {}?",
    "Any advice on {}?",
];
const CONCEPT_PHRASES: [&str; 4] = [
    "Explain {}.",
    "What is {}?",
    "Can you explain {} simply?",
    "Help me understand {}.",
];
const CATEGORY_PHRASES: [&str; 6] = [
    "Name three {}.",
    "List three {}.",
    "What are some {}?",
    "Give me three examples of {}.",
    "Tell me three {}.",
    "Which {} do you know?",
];
/// Both phrasings of every sum and product, so that training sees each fact asked two ways
/// and a held-out phrasing of a trained fact can be answered.
const ARITHMETIC_PHRASES: [&str; 2] = ["What is {}?", "Compute {}."];

/// Every task, in a fixed order.
pub fn all_tasks() -> Vec<Task> {
    let mut out = Vec::new();
    for (animal, ..) in ANIMALS {
        for p in ANIMAL_PHRASES {
            out.push(Task {
                kind: TaskKind::Animal,
                prompt: p.replace("{}", animal),
                subject: animal.into(),
                must_mention: animal.into(),
            });
        }
    }
    for (topic, _) in TIPS {
        for p in TIP_PHRASES {
            out.push(Task {
                kind: TaskKind::Tips,
                prompt: p.replace("{}", topic),
                subject: topic.into(),
                must_mention: topic.into(),
            });
        }
    }
    for (concept, ..) in CONCEPTS {
        for p in CONCEPT_PHRASES {
            out.push(Task {
                kind: TaskKind::Concept,
                prompt: p.replace("{}", concept),
                subject: concept.into(),
                must_mention: concept.trim_start_matches("the ").into(),
            });
        }
    }
    for (cat, _) in CATEGORIES {
        for p in CATEGORY_PHRASES {
            out.push(Task {
                kind: TaskKind::Category,
                prompt: p.replace("{}", cat),
                subject: cat.into(),
                must_mention: cat.into(),
            });
        }
    }
    for a in 1..=9u32 {
        for b in 1..=9u32 {
            for (op, word) in [('+', "plus"), ('*', "times")] {
                let result = if op == '+' { a + b } else { a * b };
                let subject = format!("{a} {word} {b}");
                for p in ARITHMETIC_PHRASES {
                    out.push(Task {
                        kind: TaskKind::Arithmetic,
                        prompt: p.replace("{}", &subject),
                        subject: subject.clone(),
                        must_mention: result.to_string(),
                    });
                }
            }
        }
    }
    out
}

/// The tasks split into training and held-out evaluation sets.
#[derive(Clone, Debug)]
pub struct TaskSet {
    /// Tasks training may use.
    pub train: Vec<Task>,
    /// Tasks kept for evaluation only: 20 of each kind.
    pub eval: Vec<Task>,
}

/// Held-out tasks per kind.
const HELD_OUT_PER_KIND: usize = 20;

/// The order in which the phrasings of a kind with `p` phrasings are taken for holding out:
/// the first, the middle one, then the rest, so that a subject that loses two phrasings keeps
/// dissimilar ones in training.
fn phrasing_order(p: usize) -> Vec<usize> {
    let mut order = vec![0, p / 2];
    order.extend((1..p).filter(|&i| i != p / 2));
    order.dedup();
    order
}

impl TaskSet {
    /// The standard split: new phrasings of subjects that training knows, so that an answer
    /// can be on topic and the split measures style, not knowledge the model never saw (a
    /// tiny model cannot work out a product it was never told).
    ///
    /// Each kind is a subject × phrasing grid (for arithmetic the subject is the sum or
    /// product). Held-out cells run along diagonals: in round `r`, subject `s` loses phrasing
    /// `(s + offset_r) % phrasings`, the subjects spread over the kind when there are more
    /// than 20. So every held-out subject keeps most of its phrasings in training, and every
    /// phrasing is trained with most subjects.
    pub fn standard() -> TaskSet {
        let mut train = Vec::new();
        let mut eval = Vec::new();
        let all = all_tasks();
        let grids = [
            (TaskKind::Animal, ANIMAL_PHRASES.len()),
            (TaskKind::Tips, TIP_PHRASES.len()),
            (TaskKind::Arithmetic, ARITHMETIC_PHRASES.len()),
            (TaskKind::Concept, CONCEPT_PHRASES.len()),
            (TaskKind::Category, CATEGORY_PHRASES.len()),
        ];
        for (kind, phrasings) in grids {
            // Subject-major order: task i is subject i / phrasings, phrasing i % phrasings.
            let of_kind: Vec<&Task> = all.iter().filter(|t| t.kind == kind).collect();
            let subjects = of_kind.len() / phrasings;
            let spread: Vec<usize> = if subjects > HELD_OUT_PER_KIND {
                (0..HELD_OUT_PER_KIND)
                    .map(|k| k * subjects / HELD_OUT_PER_KIND)
                    .collect()
            } else {
                (0..subjects).collect()
            };
            let mut held = std::collections::HashSet::new();
            'rounds: for offset in phrasing_order(phrasings) {
                for &s in &spread {
                    if held.len() == HELD_OUT_PER_KIND {
                        break 'rounds;
                    }
                    held.insert(s * phrasings + (s + offset) % phrasings);
                }
            }
            for (i, t) in of_kind.into_iter().enumerate() {
                if held.contains(&i) {
                    eval.push(t.clone());
                } else {
                    train.push(t.clone());
                }
            }
        }
        TaskSet { train, eval }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_holds_out_twenty_of_each_kind_and_never_overlaps() {
        let s = TaskSet::standard();
        assert_eq!(s.eval.len(), 100);
        for t in &s.eval {
            assert!(
                !s.train.iter().any(|x| x.prompt == t.prompt),
                "{}",
                t.prompt
            );
        }
        assert!(s.train.len() > 300, "{}", s.train.len());
        let prompts: std::collections::HashSet<_> =
            all_tasks().into_iter().map(|t| t.prompt).collect();
        assert_eq!(prompts.len(), all_tasks().len(), "prompts are distinct");
    }

    #[test]
    fn held_out_tasks_are_new_phrasings_of_trained_subjects() {
        let s = TaskSet::standard();
        let template = |t: &Task| t.prompt.replace(&t.subject, "{}");
        let trained: std::collections::HashSet<(TaskKind, String)> =
            s.train.iter().map(|t| (t.kind, template(t))).collect();
        for kind in [
            TaskKind::Animal,
            TaskKind::Tips,
            TaskKind::Arithmetic,
            TaskKind::Concept,
            TaskKind::Category,
        ] {
            let held: Vec<&Task> = s.eval.iter().filter(|t| t.kind == kind).collect();
            assert_eq!(held.len(), 20, "{kind:?}");
            for t in held {
                assert!(
                    s.train.iter().any(|x| x.subject == t.subject),
                    "the subject of {} is trained",
                    t.prompt
                );
                assert!(
                    trained.contains(&(kind, template(t))),
                    "the phrasing of {} is trained",
                    t.prompt
                );
            }
        }
        // And no held-out prompt is trained.
        for t in &s.train {
            assert!(!s.eval.iter().any(|e| e.prompt == t.prompt));
        }
        assert_eq!(phrasing_order(4), vec![0, 2, 1, 3]);
        assert_eq!(phrasing_order(5), vec![0, 2, 1, 3, 4]);
    }
}
