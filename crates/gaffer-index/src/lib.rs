//! gaffer-index: the project index and the context manager.
//!
//! Agents that read a whole project drown in it; agents given the right few files do the job.
//! This crate indexes a repository (ignore-aware walk; per file language, size, lines, content
//! hash; tree-sitter definitions, references and imports for Python, Rust, JavaScript/TypeScript,
//! Go, Java, C/C++), caches per-file facts by content hash in an [`IndexCache`] (the store
//! implements it on SQLite), ranks files for a task text and fits the best of them into a token
//! budget, explaining why each was chosen.
//!
//! Entry points: [`select_context`] (a task text) and [`select_neighbourhood`] (changed files,
//! for review) in one call; the steps [`build_index`] / [`update_index`], [`FileGraph::build`],
//! [`rank()`], [`fit`]; [`LiveIndex`] for a process that keeps an index in memory and refreshes
//! it before each query; and for the CLI [`cli::run_index`] / [`cli::run_context`].
#![deny(missing_docs)]

pub mod cache;
pub mod cli;
pub mod error;
pub mod facts;
pub mod graph;
pub mod index;
pub mod lang;
mod lexical;
pub mod live;
pub mod mask;
pub mod pack;
pub mod rank;
pub mod select;

pub use cache::{ContentKey, DirCache, IndexCache, MemoryCache, FORMAT_VERSION};
pub use error::{Error, Result};
pub use facts::{Def, FileFacts, Import, ParsedSymbols, WordCounts};
pub use graph::FileGraph;
pub use index::{
    build_index, update_index, Index, IndexOptions, IndexReport, IndexSummary, IndexedFile, Skipped,
};
pub use lang::Lang;
pub use live::LiveIndex;
pub use mask::Masker;
pub use pack::{fit, Entry, Mode, PackOptions, Selection, Tokenizer, TokenizerKind};
pub use rank::{rank, Ranked, Weights};
pub use select::{parse_and_fit, rank_neighbourhood, select_context, select_neighbourhood};
