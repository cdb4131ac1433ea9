//! What the benches share: a generated repository, timing helpers, the machine's load.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A deterministic multi-language repository of `n` files (~6 KB each).
pub fn generate(dir: &Path, n: usize) {
    for i in 0..n {
        let pkg = format!("pkg{}", i % 50);
        let (path, body) = match i % 6 {
            0..=2 => {
                let mut s = format!(
                    "\"\"\"Module {i}.\"\"\"\nimport os\nfrom .mod{} import helper_{}\n\n",
                    (i + 1) % n,
                    (i + 1) % n
                );
                for j in 0..18 {
                    s.push_str(&format!(
                        "class Widget{i}x{j}(object):\n    \"\"\"A widget {j}.\"\"\"\n\n    def render_{j}(self, context, options=None):\n        value = helper_{}(context)\n        if options and value > {j}:\n            return os.path.join(str(value), 'widget')\n        return value\n\n",
                        (i + 1) % n
                    ));
                }
                s.push_str(&format!("def helper_{i}(x):\n    return x\n"));
                (format!("src/{pkg}/mod{i}.py"), s)
            }
            3 => {
                let mut s = format!("package {pkg}\n\nimport \"fmt\"\n\n");
                for j in 0..20 {
                    s.push_str(&format!("// Handle{i}x{j} handles.\nfunc Handle{i}x{j}(n int) string {{\n\tif n > {j} {{\n\t\treturn fmt.Sprintf(\"%d\", n)\n\t}}\n\treturn \"\"\n}}\n\n"));
                }
                (format!("go/{pkg}/f{i}.go"), s)
            }
            4 => {
                let mut s = String::from("use std::collections::HashMap;\n\n");
                for j in 0..16 {
                    s.push_str(&format!("/// Store {j}.\npub struct Store{i}x{j} {{ map: HashMap<String, u32> }}\n\nimpl Store{i}x{j} {{\n    pub fn get(&self, k: &str) -> Option<u32> {{ self.map.get(k).copied() }}\n}}\n\n"));
                }
                (format!("rs/{pkg}/s{i}.rs"), s)
            }
            _ => {
                let mut s = format!("import {{ util }} from './util{}';\n\n", i % 7);
                for j in 0..20 {
                    s.push_str(&format!("export function compute{i}x{j}(items) {{\n  return items.map((x) => util(x) + {j});\n}}\n\n"));
                }
                (format!("js/{pkg}/c{i}.js"), s)
            }
        };
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, body).unwrap();
    }
}

/// The load average when the bench starts: the machine is shared, figures move with it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// CPU time used so far (user + system, all threads) by this process and by its waited-for
/// children, from `/proc/self/stat` (clock ticks of 10 ms). On a shared machine wall times
/// move with the load; CPU times say how much work was done.
pub fn cpu_times() -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let tick = |i: usize| Duration::from_millis(f.get(i).copied().unwrap_or(0) * 10);
    // utime, stime, cutime, cstime are fields 14-17 of the line, 12-15 after the name.
    (tick(11) + tick(12), tick(13) + tick(14))
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
