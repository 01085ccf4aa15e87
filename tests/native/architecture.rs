//! The house as src/lib.rs lists it: core, engines and front ends, each tier using only the
//! tiers below it, and no circle among the modules. A module that reaches up a tier, or closes
//! a circle, fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// lib.rs's modules in its order, each with its tier.
fn listed() -> Vec<(String, &'static str)> {
    let lib = fs::read_to_string("src/lib.rs").unwrap();
    let mut tier = "";
    let mut modules = Vec::new();
    for line in lib.lines() {
        if let Some(heading) = line.strip_prefix("// ") {
            tier = TIERS
                .into_iter()
                .find(|t| heading.starts_with(t))
                .unwrap_or(tier);
        }
        if let Some(rest) = line.strip_prefix("pub mod ") {
            let name = rest.split(';').next().unwrap().trim().to_string();
            assert!(!tier.is_empty(), "{name} is listed under no tier");
            modules.push((name, tier));
        }
    }
    modules
}

/// The top-level modules `source` names through `crate::` (`crate::{a, b::c}` too), its tests
/// left out.
fn used(source: &str) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]\nmod tests").next().unwrap();
    let name = |text: &str| {
        let text = text.trim_start();
        let end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(text.len());
        text[..end].to_string()
    };
    code.match_indices("crate::")
        .flat_map(|(at, _)| {
            let rest = &code[at + "crate::".len()..];
            match rest.strip_prefix('{') {
                // Each path of the group, by its first name; a nested group's own paths are
                // below a name already taken.
                Some(group) => {
                    let (mut names, mut depth, mut start) = (Vec::new(), 0, 0);
                    for (i, c) in group.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => {
                                names.push(name(&group[start..i]));
                                break;
                            }
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                names.push(name(&group[start..i]));
                                start = i + 1;
                            }
                            _ => {}
                        }
                    }
                    names
                }
                None => vec![name(rest)],
            }
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// Each `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push((
                path.display().to_string(),
                fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    found
}

const TIERS: [&str; 3] = ["Core", "Engines", "Front ends"];

/// Which modules each module uses, by name.
fn uses(modules: &[(String, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<&str> = modules.iter().map(|(m, _)| m.as_str()).collect();
    let mut uses = BTreeMap::new();
    for (module, _) in modules {
        let root = Path::new("src").join(module);
        let files = match root.is_dir() {
            true => sources(&root),
            false => {
                let file = root.with_extension("rs");
                vec![(
                    file.display().to_string(),
                    fs::read_to_string(&file).unwrap(),
                )]
            }
        };
        let used: BTreeSet<String> = files
            .iter()
            .flat_map(|(_, text)| used(text))
            .filter(|other| other != module && known.contains(other.as_str()))
            .collect();
        uses.insert(module.clone(), used);
    }
    uses
}

/// What crosses up a tier: "cli (Front ends) uses page (Front ends)" is fine, "data (Core) uses
/// session (Engines)" is not.
fn upward(modules: &[(String, &str)], uses: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let tier = |name: &str| {
        let (_, tier) = modules.iter().find(|(m, _)| m == name).unwrap();
        TIERS.iter().position(|t| t == tier).unwrap()
    };
    let mut wrong = Vec::new();
    for (module, used) in uses {
        for other in used.iter().filter(|other| tier(other) > tier(module)) {
            let names = (TIERS[tier(module)], TIERS[tier(other)]);
            wrong.push(format!("{module} ({}) uses {other} ({})", names.0, names.1));
        }
    }
    wrong
}

/// A circle among the modules, if there is one, as the modules around it.
fn circle(uses: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        uses: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            return Some(path[at..].to_vec());
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for other in uses.get(module).into_iter().flatten() {
            if let Some(found) = visit(other, uses, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    uses.keys()
        .find_map(|module| visit(module, uses, &mut Vec::new(), &mut done))
}

#[test]
fn each_tier_uses_only_those_below_it_and_no_module_closes_a_circle() {
    let modules = listed();
    let tiers: BTreeSet<&str> = modules.iter().map(|(_, tier)| *tier).collect();
    assert_eq!(tiers.len(), TIERS.len(), "{modules:?}");
    let uses = uses(&modules);
    let wrong = upward(&modules, &uses);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(circle(&uses), None);
}

#[test]
fn a_module_reaching_up_or_closing_a_circle_is_caught() {
    let modules = vec![
        ("data".to_string(), "Core"),
        ("train".to_string(), "Core"),
        ("session".to_string(), "Engines"),
    ];
    let mut uses = BTreeMap::new();
    uses.insert("data".to_string(), BTreeSet::from(["session".to_string()]));
    uses.insert("train".to_string(), BTreeSet::from(["data".to_string()]));
    uses.insert("session".to_string(), BTreeSet::from(["train".to_string()]));
    assert_eq!(
        upward(&modules, &uses),
        ["data (Core) uses session (Engines)"]
    );
    assert_eq!(
        circle(&uses).map(|c| c.len()),
        Some(3),
        "data, session and train around"
    );
    uses.insert("data".to_string(), BTreeSet::new());
    assert!(upward(&modules, &uses).is_empty());
    assert_eq!(circle(&uses), None);
}

#[test]
fn the_modules_a_file_names_are_read_without_its_tests() {
    let used = used(concat!(
        "use crate::session::Session;\n",
        "use crate::{data::{Mnist, x}, model};\n",
        "fn f() { crate::cli::main(); }\n",
        "#[cfg(test)]\nmod tests {\n    use crate::page::x;\n}\n",
    ));
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["cli", "data", "model", "session"]
    );
}

/// The `[patch.crates-io]` lines of a Cargo.toml, as "crate = folder" with the folder's path
/// from the repository's root.
fn patches(manifest: &str, root: &str) -> Vec<String> {
    let text = fs::read_to_string(manifest).unwrap();
    let section = text
        .split("\n[patch.crates-io]\n")
        .nth(1)
        .unwrap_or_default();
    section
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter(|line| line.contains("path"))
        .map(|line| {
            let name = line.split('=').next().unwrap().trim();
            let path = line.split('"').nth(1).unwrap().trim_start_matches(root);
            format!("{name} = {path}")
        })
        .collect()
}

#[test]
fn the_fuzz_targets_build_the_patched_dependencies_that_ship() {
    let shipped = patches("Cargo.toml", "");
    assert!(shipped.len() >= 3, "{shipped:?}");
    assert_eq!(patches("fuzz/Cargo.toml", "../"), shipped);
}
