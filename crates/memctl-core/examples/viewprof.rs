use memctl_core::{Clock, Config, CoreWrite, Step, StepType, Store};
use serde_json::json;
use std::path::Path;
use std::time::Instant;

fn words(seed: &mut u64, lo: u64, hi: u64) -> String {
    let vocab = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "kernel",
        "mpirun",
        "tensor",
        "gradient",
        "optimizer",
        "loss",
        "batch",
        "layer",
        "attention",
        "sparse",
    ];
    let mut next = || {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    };
    let n = lo + next() % (hi - lo);
    (0..n).map(|_| vocab[(next() % vocab.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = Path::new(&args[2]);
    let config = Config { auto_consolidate: false, ..Config::default() };
    if args[1] == "conv" {
        let store = Store::open(path, config, Clock::System).unwrap();
        let mut seed = 0xC0417u64;
        store.create_root("n0000").unwrap();
        store
            .step_add(
                "n0000",
                &Step::new(StepType::System, json!({"text": "You tune stencil kernels."})).unwrap(),
            )
            .unwrap();
        store
            .step_add(
                "n0000",
                &Step::new(StepType::Task, json!({"text": "Find the fastest tile size."})).unwrap(),
            )
            .unwrap();
        for level in 0..50usize {
            let id = format!("n{level:04}");
            store.write(|tx| {
                if level > 0 { tx.fork(&format!("n{:04}", level - 1), Some(&id))?; }
                for n in 0..10 {
                    let (t, payload) = match n % 5 {
                        0 => (StepType::User, json!({"text": format!("try {}", words(&mut seed, 5, 12))})),
                        1 => (StepType::Planning, json!({"plan": words(&mut seed, 10, 30)})),
                        4 => (StepType::Assistant, json!({"text": words(&mut seed, 10, 40)})),
                        _ => (StepType::Action, json!({"tool": "run", "thought": words(&mut seed, 5, 15), "args": {"n": n}, "observation": words(&mut seed, 20, 80)})),
                    };
                    tx.step_add(&id, &Step::new(t, payload)?)?;
                }
                Ok(())
            }).unwrap();
        }
    } else if args[1] == "build" {
        let store = Store::open(path, config, Clock::System).unwrap();
        let mut seed = 0xC4A1u64;
        let mut prev = String::new();
        for i in 0..=1000usize {
            let id = format!("n{i:04}");
            if i == 0 {
                store.create_root(&id).unwrap();
            } else {
                store.fork(&prev, Some(&id)).unwrap();
            }
            store
                .core_set(
                    &id,
                    &format!("key{}", i % 10),
                    &format!("c{i} {}", words(&mut seed, 10, 30)),
                    CoreWrite::default(),
                )
                .unwrap();
            for _ in 0..2 {
                store
                    .recall_append(
                        &id,
                        "observation",
                        &format!("e {}", words(&mut seed, 20, 40)),
                        &["phase:x".to_string()],
                    )
                    .unwrap();
            }
            store
                .archival_add(&id, &format!("a{i} {}", words(&mut seed, 60, 120)), &["BENCH".to_string()])
                .unwrap();
            prev = id;
        }
    } else {
        let n: usize = args[3].parse().unwrap();
        let store = Store::open(path, config, Clock::System).unwrap();
        let v = store.view("n1000").unwrap();
        eprintln!("{} core {} events {} records", v.core.len(), v.events.len(), v.archival.len());
        let mut times = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            std::hint::black_box(store.view("n1000").unwrap());
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        eprintln!("median {:.3} ms", times[n / 2]);
    }
}
