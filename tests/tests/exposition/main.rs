//! What the agent exports: golden expositions of every fixture tree, names with hostile characters,
//! every fixture value in `/metrics`, the first scrape's deadline, the series budget per collector,
//! PCIe and topology, and the kernel log.
//!
//! * [`golden`]: every fixture tree's exposition against its golden file.
//! * [`escaping`]: hostile names reach the exposition intact.
//! * [`fixture_values`]: every value of every fixture tree, walked independently.
//! * [`first_scrape`]: the first scrape and a joined collection answer within their deadline.
//! * [`series_budget`]: series per collector and node, as the README's table says.
//! * [`pcie`]: PCIe links, GPU↔NIC topology, rails, GPUDirect readiness.
//! * [`kmsg`]: kernel log events counted and followed.
//! * [`kmsg_syslog`]: the kernel log read through `syslog(2)`, where `/dev/kmsg` cannot be opened.
//!
//! Run this binary with `cargo test -p railscope-tests --test exposition`, one module of it with
//! `cargo test -p railscope-tests --test exposition golden::`, and one test with
//! `cargo test -p railscope-tests --test exposition -- --exact golden::<test name>`.

mod escaping;
mod first_scrape;
mod fixture_values;
mod golden;
mod kmsg;
mod kmsg_syslog;
mod pcie;
mod series_budget;
