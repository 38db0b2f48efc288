//! The CEL environment of `olm.constraint` `cel` rules, as operator-framework/api defines it:
//! the `properties` variable and `semver_compare`, with bounds on the rule, its inputs and its work.
//!
//! cel-rust 0.15 has no runtime cost limit, step counter or interruption hook: once a program runs,
//! it runs to the end. So the bound on one evaluation holds by construction, as Kubernetes' static
//! estimate does: the input is capped ([`MAX_INPUT_PROPERTIES`], [`MAX_INPUT_BYTES`]), every rule's
//! worst-case work over any input within those caps is estimated from its AST at compile time
//! ([`CelRule::estimated_cost`]: comprehensions multiply by their range's size, `+` adds sizes,
//! `matches` costs haystack x automaton states, ...), and a rule over [`MAX_COST`] is refused.
//! Callers charge that estimate against their own budget before each evaluation.
//!
//! Rules are parsed on one long-lived thread with a large stack (cel-rust's ANTLR parser recurses
//! deeply), bounded there by the parser's own recursion limit and by the AST's depth and node count,
//! and kept in a bounded process-wide cache with their compile errors: a rule is compiled once per
//! process. `matches` is ours: its pattern must be a string literal, compiled once per rule with the
//! `regex` crate (linear time) under size limits.

use std::{
    cell::RefCell,
    collections::{HashMap, VecDeque},
    fmt,
    sync::{Arc, LazyLock, Mutex, mpsc},
};

use cel::{
    Context, Env, ExecutionError, Value,
    common::{
        ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators},
        types::{self, CelBool, CelDouble, CelInt, CelString, CelUInt},
        value::{CowVal, Val},
    },
    context::VariableResolver,
    parser::Parser,
};

use regex_automata::nfa::thompson::{self, WhichCaptures, pikevm::PikeVM};

use crate::{
    catalog::Property,
    go_format::go_float,
    meter::{Exhausted, Meter, Work},
    version::cmp_precedence,
};

/// The longest rule compiled: real rules are one line; longer ones are refused before parsing.
const MAX_RULE_BYTES: usize = 4096;
/// The deepest nesting of comprehensions (`exists`, `all`, `map`, ...): each level multiplies the
/// work by the size of a list.
const MAX_COMPREHENSION_DEPTH: usize = 2;
/// The deepest nesting of expressions the parser accepts (brackets, arguments, conditionals): its
/// recursion limit, checked while it recurses, so the parser thread's stack holds it.
const MAX_PARSE_DEPTH: u16 = 24;
/// The deepest AST accepted (unary chains such as `!!!!x` are flat for the parser but nest here):
/// the evaluator and our checks recurse once per level, on the caller's thread (2 MiB is common).
const MAX_AST_DEPTH: usize = 48;
/// The most AST nodes accepted: a 60-term `&&` chain of negations is ~240; an `&&` of 500 is not
/// a dependency rule.
const MAX_AST_NODES: usize = 400;
/// The parser thread's stack: cel-rust's ANTLR parser takes ~150 KiB per nesting level in a debug
/// build; reserved once, touched only as deep as a rule goes.
const PARSER_STACK_BYTES: usize = 64 << 20;
/// A candidate with more properties than this, or more JSON, matches no rule.
pub const MAX_INPUT_PROPERTIES: usize = 512;
/// See [`MAX_INPUT_PROPERTIES`]: 512 KiB holds every v4.20 bundle and most v4.16 ones.
pub const MAX_INPUT_BYTES: usize = 512 * 1024;
/// The most worst-case cost units one rule may take on one bundle. A unit is one node visited or
/// one byte (or value) copied, compared or scanned; a full input is ~0.5 million. A few passes over
/// it fit (an `exists` over `properties` with a few field reads costs ~2-3 million, a `matches` of
/// every type ~9 million, an `exists` over a list inside each property ~19 million); a
/// comprehension over `properties` nested in another does not (~270 million).
pub const MAX_COST: u64 = 20_000_000;
/// The longest `matches` pattern: real ones are short anchored names.
const MAX_PATTERN_BYTES: usize = 512;
/// The compiled size limit of a `matches` pattern (its NFA): `a{1000}{1000}` stops here, in time
/// proportional to the limit (or to what is left of the meter, when that is less).
const MAX_REGEX_BYTES: usize = 256 * 1024;

/// What compiling a `matches` pattern costs beyond its automaton's bytes (parsing it, building
/// and checking the automaton: about 20 us for a short pattern), in automaton bytes.
const PATTERN_FIXED_BYTES: usize = 4_000;
/// The most distinct `matches` patterns in one rule (each is compiled when the rule is).
const MAX_PATTERNS_PER_RULE: usize = 8;
/// The process-wide cache of compiled rules and compile errors: entries, and the bytes they hold
/// (sources, compiled programs and patterns, error texts). 4,000 tiny distinct rules of one
/// hostile bundle fit; so do about 16 rules whose 8 patterns are each at the size limit.
const MAX_CACHED_RULES: usize = 8192;
/// See [`MAX_CACHED_RULES`].
pub const MAX_CACHED_BYTES: usize = 32 << 20;
/// The most characters of a rule quoted in a message.
const MAX_QUOTED_CHARS: usize = 80;
/// The name our `matches` is called by after compiling: `@` keeps rule text from naming it.
const MATCHES_FN: &str = "@olm_matches";

/// Functions a rule may call besides operators: CEL's standard library as cel-rust has it, and
/// `semver_compare`.
const FUNCTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "semver_compare",
];

/// A compiled rule: it parsed within the shape limits, names only `properties`, is of type bool,
/// and its estimated worst-case cost is within [`MAX_COST`].
#[derive(Clone)]
pub struct CelRule(Arc<Compiled>);

struct Compiled {
    source: Arc<str>,
    expression: IdedExpr,
    /// The distinct `matches` patterns, each compiled once.
    patterns: Vec<Pattern>,
    /// AST nodes: what estimating the rule's cost walks.
    nodes: u64,
    cost: u64,
    /// The estimate for inputs of a size class ([`size_class`]), kept as computed: a rule is
    /// estimated once per class, not once per bundle it is evaluated against.
    costs: Mutex<Vec<(SizeClass, u64)>>,
    /// The bytes the rule holds (its AST, patterns and costs), as the rule cache counts them.
    bytes: usize,
}

/// A compiled `matches` pattern: one Thompson NFA, searched by the PikeVM (linear time: at most
/// every state per byte), so the automaton that is costed is the one that runs.
struct Pattern {
    text: String,
    vm: PikeVM,
    /// Its automaton states (what a `matches` costs per byte searched).
    states: u64,
}

/// Why a rule was not compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// It is not a valid boolean rule over `properties` within the limits (one sentence).
    #[error("{0}")]
    Invalid(String),
    /// The meter it was compiled with ran out.
    #[error("compiling a CEL rule {0}")]
    Exhausted(Exhausted),
}

impl From<Exhausted> for CompileError {
    fn from(e: Exhausted) -> Self {
        CompileError::Exhausted(e)
    }
}

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CelRule").field(&self.0.source).finish()
    }
}

/// Compiled rules and compile errors by source, bounded by [`MAX_CACHED_RULES`] and by the bytes
/// they hold, [`MAX_CACHED_BYTES`] (compiled programs and patterns, error texts, sources): when
/// full, the oldest entries are evicted (and compiled again, charged again, if needed again).
#[derive(Default)]
struct RuleCache {
    rules: HashMap<Arc<str>, (Result<CelRule, String>, usize)>,
    /// Insertion order, for eviction.
    order: VecDeque<Arc<str>>,
    bytes: usize,
}

impl RuleCache {
    fn get(&self, source: &str) -> Option<Result<CelRule, String>> {
        self.rules.get(source).map(|(r, _)| r.clone())
    }

    fn insert(&mut self, source: &str, compiled: Result<CelRule, String>) {
        let bytes = source.len()
            + match &compiled {
                Ok(rule) => rule.0.bytes,
                Err(text) => text.len(),
            };
        if bytes > MAX_CACHED_BYTES || self.rules.contains_key(source) {
            return;
        }
        while self.rules.len() >= MAX_CACHED_RULES || self.bytes + bytes > MAX_CACHED_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, freed)) = self.rules.remove(&oldest) {
                self.bytes -= freed;
            }
        }
        let key: Arc<str> = Arc::from(source);
        self.order.push_back(Arc::clone(&key));
        self.rules.insert(key, (compiled, bytes));
        self.bytes += bytes;
    }
}

static RULES: LazyLock<Mutex<RuleCache>> = LazyLock::new(Mutex::default);

/// The bytes and entries the process's rule cache holds (tests and benchmarks read it).
pub fn cache_usage() -> (usize, usize) {
    let cache = RULES.lock().unwrap_or_else(|p| p.into_inner());
    (cache.bytes, cache.rules.len())
}

impl CelRule {
    /// Compiles a rule, once per process, with no meter; the error says why it is not a valid
    /// boolean rule over `properties` within the limits.
    pub fn compile(source: &str) -> Result<CelRule, String> {
        CelRule::compile_metered(source, &mut Meter::unlimited()).map_err(|e| e.to_string())
    }

    /// Compiles a rule, once per process: parsing, checking and estimating it, and compiling its
    /// patterns, are charged to `meter` when the process's cache does not hold it already.
    pub fn compile_metered(source: &str, meter: &mut Meter) -> Result<CelRule, CompileError> {
        if source.len() > MAX_RULE_BYTES {
            return Err(CompileError::Invalid(format!(
                "the CEL rule is {} bytes, over the limit of {MAX_RULE_BYTES}",
                source.len()
            )));
        }
        if let Some(found) = RULES.lock().unwrap_or_else(|p| p.into_inner()).get(source) {
            return found.map_err(CompileError::Invalid);
        }
        let compiled = match compile_uncached(source, meter) {
            Err(CompileError::Exhausted(e)) => return Err(CompileError::Exhausted(e)),
            Err(CompileError::Invalid(text)) => Err(text),
            Ok(rule) => Ok(rule),
        };
        RULES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(source, compiled.clone());
        compiled.map_err(CompileError::Invalid)
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.0.source
    }

    /// The worst-case cost of one evaluation against any bundle (in [`MAX_COST`]'s units).
    pub fn estimated_cost(&self) -> u64 {
        self.0.cost
    }

    /// The bytes the compiled rule holds (what the rule cache counts).
    pub fn held_bytes(&self) -> usize {
        self.0.bytes
    }

    /// The worst-case cost of one evaluation against this input, plus [`EVALUATION_UNITS`]: the
    /// same estimate with the input's size class ([`size_class`]: the next powers of two of its
    /// property count and bytes) instead of the largest allowed, so that a rule is charged for
    /// the bundle it reads (a real bundle is a few KiB of the 512 KiB allowed). At most
    /// [`CelRule::estimated_cost`] plus that; [`OVER_BOUNDS_UNITS`] for an input over the bounds,
    /// which is never evaluated. Estimating a class the rule has not met yet walks its AST, charged to `meter`.
    pub fn cost_for(&self, input: &CelInput, meter: &mut Meter) -> Result<u64, Exhausted> {
        if input.value.is_none() {
            return Ok(OVER_BOUNDS_UNITS);
        }
        let class = size_class(input.count, input.bytes);
        let known = {
            let costs = self.0.costs.lock().unwrap_or_else(|p| p.into_inner());
            costs.iter().find(|(c, _)| *c == class).map(|(_, cost)| *cost)
        };
        let cost = match known {
            Some(cost) => cost,
            None => {
                meter.charge(Work::Estimate, self.0.nodes)?;
                let (count, bytes) = class.bounds();
                let cost = estimate(&self.0.expression, &self.0.patterns, input_bound(count, bytes))
                    .map_or(self.0.cost, |cost| cost.min(self.0.cost));
                let mut costs = self.0.costs.lock().unwrap_or_else(|p| p.into_inner());
                if costs.len() >= MAX_SIZE_CLASSES {
                    costs.remove(0);
                }
                costs.push((class, cost));
                cost
            }
        };
        Ok(cost.saturating_add(EVALUATION_UNITS))
    }

    /// Whether the rule is true for a bundle with these properties; an evaluation error, a
    /// non-boolean result or inputs over the bounds mean no. Converts the properties: to evaluate
    /// several rules against one bundle, build its [`CelInput`] once and use [`CelRule::matches_input`].
    pub fn matches(&self, properties: &[Property]) -> bool {
        self.matches_input(&CelInput::new(properties))
    }

    /// Whether the rule is true for this input (see [`CelRule::matches`]).
    pub fn matches_input(&self, input: &CelInput) -> bool {
        let Some(properties) = &input.value else {
            return false;
        };
        let resolver = Input(properties.as_ref());
        let mut context = Context::with_env(Arc::clone(&ENV));
        context.set_variable_resolver(&resolver);
        PATTERNS.with(|p| {
            *p.borrow_mut() = Some(Evaluating {
                rule: Arc::clone(&self.0),
                caches: Vec::new(),
            })
        });
        let result = Value::resolve_val(&self.0.expression, &context)
            .is_ok_and(|v| v.downcast_ref::<CelBool>().is_some_and(|b| *b.inner()));
        PATTERNS.with(|p| *p.borrow_mut() = None);
        result
    }
}

/// The fixed part of one evaluation's charge (a context made, the result read), beyond the
/// estimate of the expression itself: calibrated with the rest (`cargo bench --bench meter`).
pub const EVALUATION_UNITS: u64 = 100;

/// An evaluation refused because the bundle's properties are over the input's bounds: the
/// lookup and the refusal, about 100 ns.
pub const OVER_BOUNDS_UNITS: u64 = 20;

/// The most size classes a rule keeps an estimate for (10 x 20 exist; a catalog's bundles fall in
/// a few).
const MAX_SIZE_CLASSES: usize = 32;

/// An input's size class: the exponents of the next powers of two of its property count and
/// bytes, capped at the input bounds. Estimates are monotone in the input's size, so a class's
/// estimate bounds every input in it, within twice its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SizeClass(u8, u8);

fn size_class(count: u64, bytes: u64) -> SizeClass {
    let exponent = |n: u64, max: u64| n.clamp(1, max).next_power_of_two().trailing_zeros() as u8;
    SizeClass(
        exponent(count, MAX_INPUT_PROPERTIES as u64),
        exponent(bytes, MAX_INPUT_BYTES as u64),
    )
}

impl SizeClass {
    /// The largest count and bytes of the class.
    fn bounds(self) -> (u64, u64) {
        (1 << self.0, 1 << self.1)
    }
}

/// A rule quoted for a message: at most [`MAX_QUOTED_CHARS`] characters of it.
fn quote(source: &str) -> String {
    if source.chars().count() <= MAX_QUOTED_CHARS {
        return format!("{source:?}");
    }
    let cut: String = source.chars().take(MAX_QUOTED_CHARS - 3).collect();
    format!("{:?}", cut + "...")
}

/// What compiling costs beyond the source's bytes (the trip to the parser thread, setting up the
/// parser, checking and estimating a tiny rule), in source bytes: about 80 us, as much as 4 KiB
/// of source (`cargo bench --bench meter`).
const COMPILE_FIXED_BYTES: u64 = 4_000;

/// What each error the parser reports costs beyond its byte (the parser's recovery and its own
/// error text, made whether or not olmv1 quotes it: about 0.35 us each), in source bytes,
/// charged after the parse (a rule's errors are bounded by its bytes).
const PARSE_ERROR_BYTES: u64 = 80;

fn compile_uncached(source: &str, meter: &mut Meter) -> Result<CelRule, CompileError> {
    if source.trim().is_empty() {
        return Err(CompileError::Invalid("the CEL rule is empty".to_string()));
    }
    meter.charge(Work::CompileCel, COMPILE_FIXED_BYTES + source.len() as u64)?;
    let mut expression = match parse(source) {
        Ok(expression) => expression,
        Err(ParseFailure { text, errors }) => {
            meter.charge(Work::CompileCel, errors.saturating_mul(PARSE_ERROR_BYTES))?;
            return Err(CompileError::Invalid(text));
        }
    };
    let q = quote(source);
    let invalid = |e: String| CompileError::Invalid(format!("the CEL rule {q}{e}"));
    let mut scope = vec!["properties".to_string()];
    check(&expression, &mut scope, 0).map_err(|e| invalid(format!(": {e}")))?;
    if infer(&expression, &mut Vec::new()) != Type::Bool {
        return Err(invalid(" must be of type bool".to_string()));
    }
    let mut patterns = Vec::new();
    own_matches(&mut expression, &mut patterns, meter).map_err(|e| match e {
        CompileError::Invalid(e) => invalid(format!(" {e}")),
        exhausted => exhausted,
    })?;
    let (_, nodes) = shape(&expression);
    let nodes = nodes as u64;
    meter.charge(Work::Estimate, nodes)?;
    let cost = estimate(&expression, &patterns, INPUT).map_err(|e| invalid(format!(" {e}")))?;
    if cost > MAX_COST {
        return Err(invalid(format!(
            " has an estimated worst-case cost of {cost}, over the budget of {MAX_COST}"
        )));
    }
    let bytes = source.len()
        + ast_bytes(&expression)
        + patterns
            .iter()
            .map(|p| p.text.len() + p.vm.get_nfa().memory_usage() + std::mem::size_of::<Pattern>())
            .sum::<usize>()
        + MAX_SIZE_CLASSES * std::mem::size_of::<(SizeClass, u64)>()
        + std::mem::size_of::<Compiled>();
    Ok(CelRule(Arc::new(Compiled {
        source: Arc::from(source),
        expression,
        patterns,
        nodes,
        cost,
        costs: Mutex::new(Vec::new()),
        bytes,
    })))
}

/// What an AST holds: its nodes and the text they own (names, fields, literals), counted
/// generously (each node twice its size, for the vectors and boxes that hold it).
fn ast_bytes(root: &IdedExpr) -> usize {
    let mut bytes = 0;
    let mut stack = vec![root];
    while let Some(e) = stack.pop() {
        bytes += 2 * std::mem::size_of::<IdedExpr>()
            + match &e.expr {
                Expr::Ident(name) => name.len(),
                Expr::Select(s) => s.field.len(),
                Expr::Call(call) => call.func_name.len(),
                Expr::Literal(LiteralValue::String(s)) => s.inner().len(),
                Expr::Literal(LiteralValue::Bytes(b)) => b.inner().len(),
                Expr::Comprehension(c) => c.iter_var.len() + c.accu_var.len(),
                _ => 0,
            };
        stack.extend(children(e));
    }
    bytes
}

/// One parse request to the parser thread.
type ParseJob = (String, mpsc::Sender<Result<IdedExpr, ParseFailure>>);

/// A rule the parser thread refused: the one sentence saying why, and how many errors the parser
/// reported (what its work is charged by).
struct ParseFailure {
    text: String,
    errors: u64,
}

impl From<String> for ParseFailure {
    fn from(text: String) -> ParseFailure {
        ParseFailure { text, errors: 0 }
    }
}

/// The parser thread's queue: one thread for the process, started on first use.
static PARSER: LazyLock<Mutex<Option<mpsc::Sender<ParseJob>>>> = LazyLock::new(Mutex::default);

/// Parses on the parser thread: the text within [`MAX_PARSE_DEPTH`], the AST within
/// [`MAX_AST_DEPTH`] and [`MAX_AST_NODES`] (an AST over them is dropped there, on its stack).
fn parse(source: &str) -> Result<IdedExpr, ParseFailure> {
    let (reply, answer) = mpsc::channel();
    let mut job = Some((source.to_string(), reply));
    // Two tries: a parser thread that died (a parser panic) is replaced once.
    for _ in 0..2 {
        let mut parser = PARSER.lock().unwrap_or_else(|p| p.into_inner());
        if parser.is_none() {
            *parser = Some(start_parser().map_err(ParseFailure::from)?);
        }
        let sender = parser.as_ref().expect("started above");
        match sender.send(job.take().expect("one job")) {
            Ok(()) => break,
            Err(mpsc::SendError(back)) => {
                job = Some(back);
                *parser = None;
            }
        }
    }
    drop(job);
    answer.recv().unwrap_or_else(|_| {
        Err(ParseFailure::from(format!(
            "the CEL parser failed on the rule {}",
            quote(source)
        )))
    })
}

fn start_parser() -> Result<mpsc::Sender<ParseJob>, String> {
    let (sender, jobs) = mpsc::channel::<ParseJob>();
    std::thread::Builder::new()
        .name("cel-parse".to_string())
        .stack_size(PARSER_STACK_BYTES)
        .spawn(move || {
            for (source, reply) in jobs {
                let parsed = std::panic::catch_unwind(|| parse_and_shape(&source)).unwrap_or_else(|_| {
                    Err(ParseFailure::from(format!(
                        "the CEL parser failed on the rule {}",
                        quote(&source)
                    )))
                });
                let _ = reply.send(parsed);
            }
        })
        .map_err(|e| format!("the CEL parser could not start: {e}"))?;
    Ok(sender)
}

/// On the parser thread: parse, then bound the AST's depth and size without recursing.
fn parse_and_shape(source: &str) -> Result<IdedExpr, ParseFailure> {
    let q = quote(source);
    let expression = Parser::new()
        .max_recursion_depth(MAX_PARSE_DEPTH)
        .parse(source)
        .map_err(|e| ParseFailure {
            text: parse_failure(&q, &e),
            errors: e.errors.len() as u64,
        })?;
    let (depth, nodes) = shape(&expression);
    if depth > MAX_AST_DEPTH {
        return Err(ParseFailure::from(format!(
            "the CEL rule {q} is {depth} expressions deep, over the limit of {MAX_AST_DEPTH}"
        )));
    }
    if nodes > MAX_AST_NODES {
        return Err(ParseFailure::from(format!(
            "the CEL rule {q} has {nodes} expressions, over the limit of {MAX_AST_NODES}"
        )));
    }
    Ok(expression)
}

/// The most characters of the parser's first error quoted in a message.
const MAX_PARSE_ERROR_CHARS: usize = 120;

/// The parser's errors as one short sentence, made here, at the source: the first error, cut to
/// [`MAX_PARSE_ERROR_CHARS`], where it is, and how many more there are. The parser's own text
/// (one error per bad character, each with the whole line under it) is never formatted: a rule
/// of 4 KiB of bad characters would make megabytes of it.
fn parse_failure(quoted: &str, errors: &cel::parser::ParseErrors) -> String {
    if errors.errors.iter().any(|e| e.msg.contains("Recursion limit")) {
        return format!("the CEL rule {quoted} nests expressions more than {MAX_PARSE_DEPTH} deep");
    }
    let Some(first) = errors.errors.first() else {
        return format!("the CEL rule {quoted} does not compile");
    };
    let message: String = first.msg.trim().chars().take(MAX_PARSE_ERROR_CHARS + 1).collect();
    let message = if message.chars().count() > MAX_PARSE_ERROR_CHARS {
        let cut: String = message.chars().take(MAX_PARSE_ERROR_CHARS - 3).collect();
        cut + "..."
    } else {
        message
    };
    let message = crate::escape::escape_value(&message);
    let (line, column) = first.pos;
    let more = match errors.errors.len() - 1 {
        0 => String::new(),
        1 => " (and 1 more error)".to_string(),
        n => format!(" (and {n} more errors)"),
    };
    format!("the CEL rule {quoted} does not compile: {message} at {line}:{column}{more}")
}

/// The sub-expressions of an expression.
fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => Vec::new(),
        Expr::Select(s) => vec![&s.operand],
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
    }
}

/// The depth and node count of an AST, walked with an explicit stack (any depth).
fn shape(root: &IdedExpr) -> (usize, usize) {
    let (mut deepest, mut nodes) = (0, 0);
    let mut stack = vec![(root, 1usize)];
    while let Some((e, depth)) = stack.pop() {
        nodes += 1;
        deepest = deepest.max(depth);
        stack.extend(children(e).into_iter().map(|c| (c, depth + 1)));
    }
    (deepest, nodes)
}

thread_local! {
    /// The rule being evaluated on this thread, for our `matches`.
    static PATTERNS: RefCell<Option<Evaluating>> = const { RefCell::new(None) };
}

/// The rule being evaluated, and its patterns' search caches (made on a pattern's first
/// `matches` of the evaluation).
struct Evaluating {
    rule: Arc<Compiled>,
    caches: Vec<Option<thompson::pikevm::Cache>>,
}

#[cfg(test)]
thread_local! {
    /// How many patterns this thread compiled (tests count them).
    static PATTERN_COMPILES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// How many property lists this thread converted for CEL.
    static INPUT_CONVERSIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Replaces every `matches` call (global or method) with a call to ours, `@olm_matches(text,
/// pattern)`, after compiling its pattern (charged to `meter`), which must be a string literal.
/// An [`CompileError::Invalid`] here is the end of a sentence about the rule.
fn own_matches(e: &mut IdedExpr, patterns: &mut Vec<Pattern>, meter: &mut Meter) -> Result<(), CompileError> {
    let invalid = |m: &str| CompileError::Invalid(m.to_string());
    if let Expr::Call(call) = &mut e.expr
        && call.func_name == "matches"
    {
        let mut operands: Vec<IdedExpr> = call.target.take().map(|t| *t).into_iter().collect();
        operands.append(&mut call.args);
        let [_, pattern] = operands.as_slice() else {
            return Err(invalid("calls matches with other than two arguments"));
        };
        let Expr::Literal(LiteralValue::String(pattern)) = &pattern.expr else {
            return Err(invalid(
                "calls matches with a pattern that is not a string literal",
            ));
        };
        let pattern = pattern.inner().to_string();
        if !patterns.iter().any(|p| p.text == pattern) {
            if patterns.len() >= MAX_PATTERNS_PER_RULE {
                return Err(CompileError::Invalid(format!(
                    "has more than {MAX_PATTERNS_PER_RULE} matches patterns"
                )));
            }
            patterns.push(compile_pattern(pattern, meter)?);
        }
        *call = CallExpr {
            func_name: MATCHES_FN.to_string(),
            target: None,
            args: operands,
        };
    }
    match &mut e.expr {
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => Ok(()),
        Expr::Select(s) => own_matches(&mut s.operand, patterns, meter),
        Expr::Call(call) => {
            if let Some(t) = &mut call.target {
                own_matches(t, patterns, meter)?;
            }
            call.args
                .iter_mut()
                .try_for_each(|a| own_matches(a, patterns, meter))
        }
        Expr::List(list) => list
            .elements
            .iter_mut()
            .try_for_each(|a| own_matches(a, patterns, meter)),
        Expr::Map(map) => map
            .entries
            .iter_mut()
            .try_for_each(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(m) => {
                    own_matches(&mut m.key, patterns, meter)?;
                    own_matches(&mut m.value, patterns, meter)
                }
                EntryExpr::StructField(f) => own_matches(&mut f.value, patterns, meter),
            }),
        Expr::Struct(_) => Ok(()),
        Expr::Comprehension(c) => [
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ]
        .into_iter()
        .try_for_each(|x| own_matches(x, patterns, meter)),
    }
}

/// Compiles a `matches` pattern as compiling a rule does, charged to `meter`, and drops it: what
/// the calibration benchmark times for regular expressions (`cargo bench --bench meter`), without
/// a rule's CEL around it.
pub fn compile_pattern_within(pattern: &str, meter: &mut Meter) -> Result<(), CompileError> {
    compile_pattern(pattern.to_string(), meter).map(drop)
}

/// A `matches` pattern compiled, once, into a Thompson NFA within [`MAX_REGEX_BYTES`] (or what
/// `meter` has left, when less: compiling stops there), and the bytes it made charged.
fn compile_pattern(pattern: String, meter: &mut Meter) -> Result<Pattern, CompileError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(CompileError::Invalid(format!(
            "has a matches pattern of {} bytes, over the limit of {MAX_PATTERN_BYTES}",
            pattern.len()
        )));
    }
    #[cfg(test)]
    PATTERN_COMPILES.with(|c| c.set(c.get() + 1));
    let affordable = usize::try_from(meter.left() / Work::CompileRegex.weight())
        .unwrap_or(usize::MAX)
        .saturating_sub(PATTERN_FIXED_BYTES);
    let limit = MAX_REGEX_BYTES.min(affordable);
    let built = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .nfa_size_limit(Some(limit))
                .which_captures(WhichCaptures::Implicit),
        )
        .build(&pattern);
    let nfa = match built {
        Ok(nfa) => nfa,
        Err(e) if e.size_limit().is_some() && limit < MAX_REGEX_BYTES => {
            // What the meter had left ran out before the pattern's own limit.
            return Err(CompileError::Exhausted(Exhausted::Work { limit: meter.limit() }));
        }
        Err(e) => {
            let why = match std::error::Error::source(&e) {
                // The syntax error's own last line ("error: unclosed group"), without the pattern
                // drawn above it.
                Some(syntax) => syntax.to_string(),
                None => e.to_string(),
            };
            let why = why
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .trim_start_matches("error: ")
                .to_string();
            return Err(CompileError::Invalid(format!(
                "has a matches pattern {} that olmv1 cannot use: {why}",
                quote(&pattern)
            )));
        }
    };
    meter.charge(
        Work::CompileRegex,
        (PATTERN_FIXED_BYTES + nfa.memory_usage() + pattern.len()) as u64,
    )?;
    let states = nfa.states().len() as u64;
    let vm = PikeVM::new_from_nfa(nfa).map_err(|e| {
        CompileError::Invalid(format!(
            "has a matches pattern {} that olmv1 cannot use: {e}",
            quote(&pattern)
        ))
    })?;
    Ok(Pattern {
        text: pattern,
        vm,
        states,
    })
}

/// Our `matches(text, pattern)`: the pattern was compiled with the rule being evaluated.
fn olm_matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = args.first().and_then(|a| a.downcast_ref::<CelString>());
    let pattern = args.get(1).and_then(|a| a.downcast_ref::<CelString>());
    let (Some(text), Some(pattern)) = (text, pattern) else {
        return Err(ExecutionError::function_error("matches", "expects two strings"));
    };
    PATTERNS.with(|evaluating| {
        let mut evaluating = evaluating.borrow_mut();
        let Some(Evaluating { rule, caches }) = evaluating.as_mut() else {
            return Err(ExecutionError::function_error("matches", "pattern not compiled"));
        };
        let Some(i) = rule.patterns.iter().position(|p| p.text == *pattern.inner()) else {
            return Err(ExecutionError::function_error("matches", "pattern not compiled"));
        };
        if caches.len() < rule.patterns.len() {
            caches.resize_with(rule.patterns.len(), || None);
        }
        let vm = &rule.patterns[i].vm;
        let cache = caches[i].get_or_insert_with(|| vm.create_cache());
        Ok(CowVal::owned(CelBool::from(
            vm.is_match(cache, text.inner().as_bytes()),
        )))
    })
}

/// `semver_compare(a, b)` over the `fmt.Sprint` of both.
fn olm_semver_compare<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let (a, b) = (sprint(a.as_ref())?, sprint(b.as_ref())?);
    semver_compare(&a, &b)
        .map(|c| CowVal::owned(CelInt::from(c)))
        .map_err(|e| ExecutionError::function_error("semver_compare", e))
}

/// The environment every rule runs in: CEL's standard library (no optional values, as cel-go
/// without its extension), `semver_compare` and our `matches`.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::default().with_optional_support(false).with_stdlib();
    env.add_overload(
        MATCHES_FN,
        "olm_matches_string_string",
        vec![types::STRING_TYPE, types::STRING_TYPE],
        olm_matches,
    )
    .expect("a new overload");
    env.add_overload(
        "semver_compare",
        "olm_semver_compare",
        vec![types::DYN_TYPE, types::DYN_TYPE],
        olm_semver_compare,
    )
    .expect("a new overload");
    Arc::new(env)
});

/// A bundle's properties as CEL sees them (`[{type, value}]`, JSON numbers as doubles), built
/// once per bundle; none when over [`MAX_INPUT_PROPERTIES`] or [`MAX_INPUT_BYTES`] (no rule matches).
pub struct CelInput {
    value: Option<Box<dyn Val>>,
    /// How many properties, and their bytes (type and JSON value), as [`INPUT`] counts them.
    count: u64,
    bytes: u64,
}

impl fmt::Debug for CelInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.value.is_some() {
            "CelInput"
        } else {
            "CelInput(over the bounds)"
        })
    }
}

impl CelInput {
    /// What converting `properties` reads: their types' and values' bytes.
    pub fn bytes_of(properties: &[Property]) -> u64 {
        properties
            .iter()
            .map(|p| (p.type_.len() + p.value.raw().len()) as u64)
            .sum()
    }

    /// Whether the properties were within the input's bounds (else no rule reads them).
    pub fn is_within_bounds(&self) -> bool {
        self.value.is_some()
    }

    /// Converts the properties (from JSON), when within the bounds.
    pub fn new(properties: &[Property]) -> CelInput {
        #[cfg(test)]
        INPUT_CONVERSIONS.with(|c| c.set(c.get() + 1));
        let count = properties.len();
        let bytes: usize = properties
            .iter()
            .map(|p| p.type_.len() + p.value.raw().len())
            .sum();
        if count > MAX_INPUT_PROPERTIES || bytes > MAX_INPUT_BYTES {
            return CelInput {
                value: None,
                count: count as u64,
                bytes: bytes as u64,
            };
        }
        let list: Vec<Value> = properties
            .iter()
            .map(|p| {
                let map = HashMap::from([
                    ("type".to_string(), Value::String(Arc::new(p.type_.to_string()))),
                    ("value".to_string(), json_to_cel(&p.value.to_value())),
                ]);
                Value::from(map)
            })
            .collect();
        CelInput {
            value: Value::List(Arc::new(list)).try_into().ok(),
            count: count as u64,
            bytes: bytes as u64,
        }
    }
}

/// Hands `properties` to the evaluator by reference: nothing is copied per evaluation.
struct Input<'a>(&'a dyn Val);

impl VariableResolver for Input<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "properties").then_some(CowVal::Borrowed(self.0))
    }
}

/// Work in cost units: a fixed part plus, per enclosing comprehension level, a coefficient on the
/// size of that level's current element. Summed over a loop, a coefficient costs at most the
/// coefficient x the size of the whole range (the elements' sizes add up to it), not x the count:
/// reading `p.value.version` of every property reads each byte once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cost {
    fixed: u64,
    per: [u64; MAX_COMPREHENSION_DEPTH],
}

impl Cost {
    fn units(n: u64) -> Cost {
        Cost {
            fixed: n,
            ..Cost::default()
        }
    }

    fn plus(self, other: Cost) -> Cost {
        let mut per = self.per;
        for (a, b) in per.iter_mut().zip(other.per) {
            *a = a.saturating_add(b);
        }
        Cost {
            fixed: self.fixed.saturating_add(other.fixed),
            per,
        }
    }

    fn times(self, k: u64) -> Cost {
        Cost {
            fixed: self.fixed.saturating_mul(k),
            per: self.per.map(|c| c.saturating_mul(k)),
        }
    }

    /// The cost at the top level, where no element is bound (a coefficient left over counts as
    /// reading the whole input).
    fn total(self) -> u64 {
        self.per
            .iter()
            .fold(self.fixed, |t, c| t.saturating_add(c.saturating_mul(INPUT.size)))
    }

    /// This cost with level `level`'s coefficient turned into units for an element within `bound`.
    fn settle(mut self, level: usize, bound: Bound) -> Cost {
        let c = std::mem::take(&mut self.per[level]);
        self.plus(Cost::units(c.saturating_mul(bound.size)))
    }
}

/// The worst case of a value: its footprint (`size`: 1 per scalar, container or key, plus a
/// string's bytes), its length (`count`: elements, entries or bytes) and the footprint of any part
/// of it (`item`). `origin` is the comprehension level whose current element contains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bound {
    size: u64,
    count: u64,
    item: u64,
    origin: Option<usize>,
}

impl Bound {
    const SCALAR: Bound = Bound {
        size: 1,
        count: 0,
        item: 0,
        origin: None,
    };

    /// Any part of this value.
    fn part(self) -> Bound {
        Bound {
            size: self.item,
            count: self.item,
            item: self.item,
            origin: self.origin,
        }
    }

    /// The cost of reading or copying all of it.
    fn read(self) -> Cost {
        match self.origin {
            Some(level) => {
                let mut cost = Cost::units(1);
                cost.per[level] = 1;
                cost
            }
            None => Cost::units(self.size.saturating_add(1)),
        }
    }

    /// Either value.
    fn join(self, other: Bound) -> Bound {
        Bound {
            size: self.size.max(other.size),
            count: self.count.max(other.count),
            item: self.item.max(other.item),
            origin: if self.origin == other.origin {
                self.origin
            } else {
                None
            },
        }
    }

    fn within(self, other: Bound) -> bool {
        self.size <= other.size && self.count <= other.count && self.item <= other.item
    }
}

/// `properties`: a JSON value of n bytes is at most n units (every scalar, bracket, key and string
/// takes at least as many bytes as units), and each `{type, value}` map adds 13 (the map, its keys
/// `type` and `value`, the type's terminator).
const INPUT: Bound = input_bound(MAX_INPUT_PROPERTIES as u64, MAX_INPUT_BYTES as u64);

/// `properties` of `count` properties and `bytes` of JSON (see [`INPUT`]).
const fn input_bound(count: u64, bytes: u64) -> Bound {
    let size = 1 + bytes + 13 * count;
    Bound {
        size,
        count,
        item: size,
        origin: None,
    }
}

/// The longest text `string(x)` makes of a number or bool (a double is printed without exponent:
/// 5e-324 takes 326 characters).
const MAX_FORMATTED_BYTES: u64 = 400;

/// What a name stands for while estimating.
#[derive(Debug, Clone)]
struct Binding {
    name: String,
    bound: Bound,
}

/// The worst-case cost of one evaluation of a checked rule (see [`Cost`] and [`Bound`]) against
/// an input within `input`.
fn estimate(e: &IdedExpr, patterns: &[Pattern], input: Bound) -> Result<u64, String> {
    let mut scope = vec![Binding {
        name: "properties".to_string(),
        bound: input,
    }];
    let (cost, _) = Estimator { patterns }.walk(e, &mut scope, 0)?;
    Ok(cost.total())
}

struct Estimator<'a> {
    patterns: &'a [Pattern],
}

impl Estimator<'_> {
    fn walk(&self, e: &IdedExpr, scope: &mut Vec<Binding>, level: usize) -> Result<(Cost, Bound), String> {
        let node = Cost::units(1);
        Ok(match &e.expr {
            Expr::Unspecified => (node, Bound::SCALAR),
            Expr::Literal(LiteralValue::String(s)) => (node, text(s.inner().len() as u64)),
            Expr::Literal(LiteralValue::Bytes(b)) => (node, text(b.inner().len() as u64)),
            Expr::Literal(_) => (node, Bound::SCALAR),
            Expr::Ident(name) => {
                let bound = scope
                    .iter()
                    .rev()
                    .find(|b| b.name == *name)
                    .map(|b| b.bound)
                    .ok_or_else(|| format!("names {name:?}, which has no cost bound"))?;
                (node.plus(Cost::units(name.len() as u64)), bound)
            }
            Expr::Select(s) => {
                let (cost, operand) = self.walk(&s.operand, scope, level)?;
                let cost = cost.plus(node).plus(Cost::units(2 * s.field.len() as u64));
                (cost, if s.test { Bound::SCALAR } else { operand.part() })
            }
            Expr::List(list) => {
                let mut cost = node;
                let mut bound = Bound {
                    size: 1,
                    count: list.elements.len() as u64,
                    item: 0,
                    origin: None,
                };
                for element in &list.elements {
                    let (c, b) = self.walk(element, scope, level)?;
                    cost = cost.plus(c).plus(b.read());
                    bound.size = bound.size.saturating_add(b.size);
                    bound.item = bound.item.max(b.size);
                }
                (cost, bound)
            }
            Expr::Map(map) => {
                let mut cost = node;
                let mut bound = Bound {
                    size: 1,
                    count: map.entries.len() as u64,
                    item: 0,
                    origin: None,
                };
                for entry in &map.entries {
                    let EntryExpr::MapEntry(m) = &entry.expr else {
                        return Err("has a struct field, which has no cost bound".to_string());
                    };
                    for part in [&m.key, &m.value] {
                        let (c, b) = self.walk(part, scope, level)?;
                        cost = cost.plus(c).plus(b.read());
                        bound.size = bound.size.saturating_add(b.size);
                        bound.item = bound.item.max(b.size);
                    }
                }
                (cost, bound)
            }
            Expr::Struct(_) => return Err("builds a message, which has no cost bound".to_string()),
            Expr::Comprehension(_) => self.comprehension(e, scope, level)?,
            Expr::Call(call) => self.call(call, scope, level)?,
        })
    }

    fn call(&self, call: &CallExpr, scope: &mut Vec<Binding>, level: usize) -> Result<(Cost, Bound), String> {
        let mut cost = Cost::units(1);
        let mut operands = Vec::new();
        for operand in call.target.iter().map(|t| &**t).chain(&call.args) {
            let (c, b) = self.walk(operand, scope, level)?;
            cost = cost.plus(c);
            operands.push(b);
        }
        let arg = |i: usize| operands.get(i).copied().unwrap_or(Bound::SCALAR);
        let (a, b) = (arg(0), arg(1));
        let name = call.func_name.as_str();
        // Reading every operand: a copy, a scan, or an error message quoting it (cel-rust's
        // "unsupported binary operator" and "not comparable" errors convert both sides to values).
        let reads = operands.iter().fold(Cost::default(), |c, b| c.plus(b.read()));
        let (work, bound) = match name {
            operators::CONDITIONAL => (Cost::default(), b.join(arg(2))),
            operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::NOT_STRICTLY_FALSE => (Cost::default(), Bound::SCALAR),
            operators::NEGATE
            | operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS => (reads, Bound::SCALAR),
            // Deep equality never fails and stops at the shorter side.
            operators::EQUALS | operators::NOT_EQUALS => (shorter(a, b), Bound::SCALAR),
            operators::IN => (
                b.read().plus(a.read().times(b.count.saturating_add(1))),
                Bound::SCALAR,
            ),
            "contains" => (
                b.read()
                    .times(a.count.saturating_add(1))
                    .plus(a.read().times(b.count.saturating_add(1))),
                Bound::SCALAR,
            ),
            "startsWith" | "endsWith" => (reads, Bound::SCALAR),
            // Numbers add in one unit (only true scalars: a string's bound has parts).
            operators::ADD if a == Bound::SCALAR && b == Bound::SCALAR => (Cost::default(), Bound::SCALAR),
            // A copy of both sides: strings, lists.
            operators::ADD => (
                a.read().plus(b.read()),
                Bound {
                    size: a.size.saturating_add(b.size),
                    count: a.count.saturating_add(b.count),
                    item: a.item.max(b.item),
                    origin: None,
                },
            ),
            operators::INDEX => (reads, a.part()),
            "size" | "int" | "uint" | "double" | "bool" | "type" => (a.read(), Bound::SCALAR),
            // A new string: the value's text, or a number formatted (far longer than its JSON:
            // 5e-324 prints 326 characters), so it is counted whole wherever it is read next.
            "string" | "bytes" => (a.read(), text(a.size.saturating_add(MAX_FORMATTED_BYTES))),
            "dyn" => (Cost::default(), a),
            // Go's Sprint of each side (a copy) and a parse of both.
            "semver_compare" => (a.read().plus(b.read()).times(2), Bound::SCALAR),
            MATCHES_FN => {
                let pattern = call.args.get(1).and_then(|p| match &p.expr {
                    Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
                    _ => None,
                });
                let states = pattern
                    .and_then(|p| self.patterns.iter().find(|s| s.text == *p))
                    .map(|s| s.states)
                    .ok_or("calls matches with a pattern that is not a string literal")?;
                // `is_match` runs one forward search; its linear-time engines visit at most
                // every state per byte.
                (a.read().times(states + 1), Bound::SCALAR)
            }
            other => return Err(format!("calls {other:?}, which has no cost bound")),
        };
        Ok((cost.plus(work), bound))
    }

    fn comprehension(
        &self,
        e: &IdedExpr,
        scope: &mut Vec<Binding>,
        level: usize,
    ) -> Result<(Cost, Bound), String> {
        let Expr::Comprehension(c) = &e.expr else {
            unreachable!("called on comprehensions")
        };
        if level >= MAX_COMPREHENSION_DEPTH || c.iter_var2.is_some() {
            return Err("nests macros deeper than its cost can be bounded".to_string());
        }
        let (range_cost, range) = self.walk(&c.iter_range, scope, level)?;
        let (init_cost, init) = self.walk(&c.accu_init, scope, level)?;
        let n = range.count;
        let element = Bound {
            origin: Some(level),
            ..range.part()
        };
        let before = scope.len();
        let result = self.loop_body(c, scope, level, init, element, (n, range.size));
        scope.truncate(before);
        let (per_iteration, tail, bound) = result?;
        // Per iteration: the element's copy and the step; the part of the step that reads the
        // element adds up to the range's size over the loop.
        let mut fixed_part = per_iteration.plus(Cost::units(4));
        fixed_part.per[level] = 0;
        let element_reads = range.read().times(per_iteration.per[level].saturating_add(1));
        // A loop over a part of an outer element runs at most that element's size times: charged
        // to the outer level, it too adds up to the outer range's size.
        let iterations = match range.origin {
            Some(outer) if fixed_part.per == [0; MAX_COMPREHENSION_DEPTH] => {
                let mut cost = Cost::default();
                cost.per[outer] = fixed_part.fixed;
                cost
            }
            _ => fixed_part.times(n),
        };
        let cost = range_cost
            .plus(init_cost)
            .plus(iterations)
            .plus(element_reads)
            .plus(tail.settle(level, element))
            .plus(bound.read());
        Ok((cost, bound))
    }

    /// The cost of one iteration, the cost after the loop, and the result's bound.
    fn loop_body(
        &self,
        c: &cel::common::ast::ComprehensionExpr,
        scope: &mut Vec<Binding>,
        level: usize,
        init: Bound,
        element: Bound,
        (n, range_size): (u64, u64),
    ) -> Result<(Cost, Cost, Bound), String> {
        scope.push(Binding {
            name: c.iter_var.clone(),
            bound: element,
        });
        if let Some((guard, items)) = append_step(c) {
            // map and filter: cel-rust appends each iteration's items to one list in place.
            let mut per = Cost::default();
            if let Some(guard) = guard {
                per = per.plus(self.walk(guard, scope, level + 1)?.0);
            }
            // Each iteration appends the elements of a list literal (`[x]`): an element read from
            // this level's element adds up to the range's size over the loop.
            let Expr::List(list) = &items.expr else {
                unreachable!("append_step checks the list")
            };
            let mut bound = Bound {
                size: n.saturating_add(1),
                count: n.saturating_mul(list.elements.len() as u64),
                item: 0,
                origin: None,
            };
            per = per.plus(Cost::units(1));
            for element in &list.elements {
                let (c, b) = self.walk(element, scope, level + 1)?;
                per = per.plus(c).plus(b.read());
                let total = if b.origin == Some(level) {
                    range_size.saturating_add(n)
                } else {
                    b.size.saturating_mul(n)
                };
                bound.size = bound.size.saturating_add(total);
                bound.item = bound.item.max(b.size);
            }
            scope.push(Binding {
                name: c.accu_var.clone(),
                bound,
            });
            per = per.plus(self.walk(&c.loop_cond, scope, level + 1)?.0);
            return Ok((per, Cost::units(1), bound));
        }
        // Otherwise the accumulator must stay within the join of its start and one step (bools
        // and counts of all, exists, exists_one); one that grows has no bound here.
        scope.push(Binding {
            name: c.accu_var.clone(),
            bound: init,
        });
        let (_, once) = self.walk(&c.loop_step, scope, level + 1)?;
        let accu = init.join(once);
        let accu = Bound { origin: None, ..accu };
        scope.last_mut().expect("pushed above").bound = accu;
        let (step_cost, again) = self.walk(&c.loop_step, scope, level + 1)?;
        if !again.within(accu) {
            return Err("has a macro whose accumulator grows, which has no cost bound".to_string());
        }
        let (cond_cost, _) = self.walk(&c.loop_cond, scope, level + 1)?;
        let (result_cost, bound) = self.walk(&c.result, scope, level)?;
        Ok((
            step_cost.plus(cond_cost).plus(accu.read()),
            result_cost,
            Bound {
                origin: None,
                ..bound
            },
        ))
    }
}

/// cel-rust's in-place `map`/`filter` shape (its `AppendStep`): result and accumulator the same
/// name, a literal loop condition, an empty list to start, and a step `accu + [x]` or
/// `guard ? accu + [x] : accu`. The guard and the appended list.
fn append_step(c: &cel::common::ast::ComprehensionExpr) -> Option<(Option<&IdedExpr>, &IdedExpr)> {
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
    let empty_list = matches!(&c.accu_init.expr, Expr::List(l) if l.elements.is_empty());
    if !empty_list || !is_accu(&c.result) || !matches!(c.loop_cond.expr, Expr::Literal(_)) {
        return None;
    }
    let items_of = |e: &'_ IdedExpr| -> Option<()> {
        match &e.expr {
            Expr::Call(call) if call.func_name == operators::ADD && call.target.is_none() => {
                match call.args.as_slice() {
                    [lhs, rhs] if is_accu(lhs) && matches!(rhs.expr, Expr::List(_)) => Some(()),
                    _ => None,
                }
            }
            _ => None,
        }
    };
    let Expr::Call(step) = &c.loop_step.expr else {
        return None;
    };
    if step.func_name == operators::CONDITIONAL && step.target.is_none() {
        if let [guard, add, otherwise] = step.args.as_slice()
            && is_accu(otherwise)
        {
            items_of(add)?;
            let Expr::Call(add) = &add.expr else { return None };
            return Some((Some(guard), &add.args[1]));
        }
        return None;
    }
    items_of(&c.loop_step)?;
    Some((None, &step.args[1]))
}

/// A string or bytes value of at most n bytes.
fn text(n: u64) -> Bound {
    Bound {
        size: n + 1,
        count: n,
        item: 1,
        origin: None,
    }
}

/// Comparing two values: up to the shorter one, read once.
fn shorter(a: Bound, b: Bound) -> Cost {
    match (a.origin, b.origin) {
        (None, None) => Cost::units(a.size.min(b.size).saturating_add(1)),
        (Some(_), None) if b.size <= a.size => b.read(),
        (None, Some(_)) if a.size <= b.size => a.read(),
        (Some(_), _) => a.read(),
        (None, Some(_)) => b.read(),
    }
}
/// Go's `fmt.Sprint` of a CEL value's Go value, for the scalars a rule passes to `semver_compare`.
fn sprint(value: &dyn Val) -> Result<String, ExecutionError> {
    if let Some(s) = value.downcast_ref::<CelString>() {
        return Ok(s.inner().to_string());
    }
    if let Some(i) = value.downcast_ref::<CelInt>() {
        return Ok(i.inner().to_string());
    }
    if let Some(u) = value.downcast_ref::<CelUInt>() {
        return Ok(u.inner().to_string());
    }
    if let Some(f) = value.downcast_ref::<CelDouble>() {
        return Ok(go_float(*f.inner()));
    }
    if let Some(b) = value.downcast_ref::<CelBool>() {
        return Ok(b.inner().to_string());
    }
    Err(ExecutionError::function_error(
        "semver_compare",
        format!("unable to parse '{value:?}' to semver format"),
    ))
}

/// blang/semver `Compare` of `ParseTolerant(a)` and `ParseTolerant(b)`: -1, 0 or 1.
pub fn semver_compare(a: &str, b: &str) -> Result<i64, String> {
    let a = parse_tolerant(a).map_err(|e| format!("unable to parse '{a}' to semver format: {e}"))?;
    let b = parse_tolerant(b).map_err(|e| format!("unable to parse '{b}' to semver format: {e}"))?;
    Ok(cmp_precedence(&a, &b) as i64)
}

/// blang/semver v4 `ParseTolerant`: surrounding spaces and a leading `v` dropped, leading zeroes
/// of each part dropped, a missing minor or patch taken as 0.
fn parse_tolerant(text: &str) -> Result<semver::Version, String> {
    let text = text.trim();
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts: Vec<String> = text.splitn(3, '.').map(str::to_string).collect();
    for part in &mut parts {
        if part.len() > 1 {
            let trimmed = part.trim_start_matches('0');
            *part = if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                format!("0{trimmed}")
            } else {
                trimmed.to_string()
            };
        }
    }
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("Short version cannot contain PreRelease/Build meta data".to_string());
        }
        while parts.len() < 3 {
            parts.push("0".to_string());
        }
    }
    crate::version::parse_strict(&parts.join(".")).map_err(|e| e.to_string())
}

/// A JSON value as Go's decoder gives it to CEL: numbers are doubles.
fn json_to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(items.iter().map(json_to_cel).collect())),
        serde_json::Value::Object(map) => {
            let map: HashMap<String, Value> = map.iter().map(|(k, v)| (k.clone(), json_to_cel(v))).collect();
            Value::from(map)
        }
    }
}

/// Names only declared variables and known functions; comprehensions nested at most
/// [`MAX_COMPREHENSION_DEPTH`] deep.
fn check(e: &IdedExpr, scope: &mut Vec<String>, comprehensions: usize) -> Result<(), String> {
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => Ok(()),
        Expr::Ident(name) => {
            if scope.iter().any(|s| s == name) {
                Ok(())
            } else {
                Err(format!("undeclared reference to '{name}'"))
            }
        }
        Expr::Select(s) => check(&s.operand, scope, comprehensions),
        Expr::Call(call) => {
            let operator = call.func_name.starts_with(['_', '@', '!', '-']);
            if !operator && !FUNCTIONS.contains(&call.func_name.as_str()) {
                return Err(format!("undeclared reference to '{}'", call.func_name));
            }
            if let Some(t) = &call.target {
                check(t, scope, comprehensions)?;
            }
            call.args.iter().try_for_each(|a| check(a, scope, comprehensions))
        }
        Expr::List(list) => list
            .elements
            .iter()
            .try_for_each(|a| check(a, scope, comprehensions)),
        Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(m) => {
                check(&m.key, scope, comprehensions)?;
                check(&m.value, scope, comprehensions)
            }
            EntryExpr::StructField(f) => check(&f.value, scope, comprehensions),
        }),
        Expr::Struct(s) => Err(format!("undeclared reference to type '{}'", s.type_name)),
        Expr::Comprehension(c) => {
            if comprehensions + 1 > MAX_COMPREHENSION_DEPTH {
                return Err(format!(
                    "macros such as exists are nested more than {MAX_COMPREHENSION_DEPTH} deep"
                ));
            }
            check(&c.iter_range, scope, comprehensions)?;
            check(&c.accu_init, scope, comprehensions)?;
            let before = scope.len();
            scope.push(c.accu_var.clone());
            scope.push(c.iter_var.clone());
            scope.extend(c.iter_var2.clone());
            let inner = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .try_for_each(|x| check(x, scope, comprehensions + 1));
            scope.truncate(before);
            inner
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Bool,
    Other,
}

/// The static type of an expression as far as "is it bool" goes: cel-go's checker refuses a rule
/// whose output type is not bool (`dyn` included), and so do we.
fn infer(e: &IdedExpr, accumulators: &mut Vec<(String, Type)>) -> Type {
    match &e.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => Type::Bool,
        Expr::Ident(name) => accumulators
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or(Type::Other, |(_, t)| *t),
        Expr::Select(s) if s.test => Type::Bool,
        Expr::Call(call) => match call.func_name.as_str() {
            operators::CONDITIONAL => {
                let both = call.args.get(1).zip(call.args.get(2));
                match both {
                    Some((a, b))
                        if infer(a, accumulators) == Type::Bool && infer(b, accumulators) == Type::Bool =>
                    {
                        Type::Bool
                    }
                    _ => Type::Other,
                }
            }
            operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::EQUALS
            | operators::NOT_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::IN
            | operators::NOT_STRICTLY_FALSE
            | "contains"
            | "startsWith"
            | "endsWith"
            | "matches"
            | "bool" => Type::Bool,
            _ => Type::Other,
        },
        Expr::Comprehension(c) => {
            let init = infer(&c.accu_init, accumulators);
            accumulators.push((c.accu_var.clone(), init));
            let t = infer(&c.result, accumulators);
            accumulators.pop();
            t
        }
        _ => Type::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::PropertyValue;

    #[test]
    fn semver_compare_is_blang_compare_after_parse_tolerant() {
        assert_eq!(semver_compare("1.2.0", "1.10.0"), Ok(-1));
        assert_eq!(semver_compare("v1.2", "1.2.0"), Ok(0));
        assert_eq!(semver_compare(" 01.02.03 ", "1.2.3"), Ok(0));
        assert_eq!(semver_compare("1.0.0-alpha", "1.0.0"), Ok(-1));
        assert_eq!(semver_compare("1.0.0+build", "1.0.0"), Ok(0));
        assert_eq!(semver_compare("2", "1.9.9"), Ok(1));
        assert!(
            semver_compare("1.2-beta", "1.0.0")
                .unwrap_err()
                .contains("Short version")
        );
        assert!(semver_compare("banana", "1.0.0").is_err());
    }

    fn props(version: &str) -> Vec<Property> {
        vec![
            Property::new(
                "olm.package",
                PropertyValue::from_json(&format!(r#"{{"packageName":"p","version":"{version}"}}"#)).unwrap(),
            ),
            Property::new("weight", PropertyValue::from_json("3").unwrap()),
        ]
    }

    #[test]
    fn rules_evaluate_over_properties() {
        let rule = CelRule::compile(
            r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "v1.1") >= 0)"#,
        )
        .unwrap();
        assert!(rule.matches(&props("1.1.0")));
        assert!(!rule.matches(&props("1.0.9")));
        // Numbers are doubles, as Go decodes JSON; an int literal still compares equal.
        let rule = CelRule::compile(r#"properties.exists(p, p.type == "weight" && p.value == 3.0)"#).unwrap();
        assert!(rule.matches(&props("1.0.0")));
        // A runtime error (an unparsable version) is "no".
        let rule = CelRule::compile(
            r#"properties.all(p, p.type != "olm.package" || semver_compare(p.value.version, "1.0.0") == 0)"#,
        )
        .unwrap();
        assert!(!rule.matches(&props("not-a-version")));
        assert!(rule.matches(&props("1.0.0")));
        assert!(CelRule::compile("true ? properties.size() > 0 : false").is_ok());
    }

    /// The refusal of `source`, which must not compile.
    fn refusal(source: &str) -> String {
        CelRule::compile(source).unwrap_err()
    }

    /// The cost a refusal names, checking the sentence around it.
    fn refused_cost(source: &str) -> u64 {
        let e = refusal(source);
        let prefix = format!(
            "the CEL rule {} has an estimated worst-case cost of ",
            quote(source)
        );
        let suffix = format!(", over the budget of {MAX_COST}");
        assert!(e.starts_with(&prefix) && e.ends_with(&suffix), "{e}");
        let cost: u64 = e[prefix.len()..e.len() - suffix.len()].parse().unwrap();
        assert!(cost > MAX_COST);
        cost
    }

    #[test]
    fn rules_are_typed_and_name_only_properties() {
        assert_eq!(refusal("1 + 1"), "the CEL rule \"1 + 1\" must be of type bool");
        assert_eq!(
            refusal("properties[0].value"),
            "the CEL rule \"properties[0].value\" must be of type bool"
        );
        assert_eq!(
            refusal("unknown_fn(properties)"),
            "the CEL rule \"unknown_fn(properties)\": undeclared reference to 'unknown_fn'"
        );
        assert_eq!(refusal("  "), "the CEL rule is empty");
        assert_eq!(
            refusal(&"a".repeat(MAX_RULE_BYTES + 1)),
            "the CEL rule is 4097 bytes, over the limit of 4096"
        );
        let nested = "properties.exists(a, properties.exists(b, properties.exists(c, true)))";
        assert_eq!(
            refusal(nested),
            format!("the CEL rule {nested:?}: macros such as exists are nested more than 2 deep")
        );
        // Optional syntax is cel-go's extension, not the OLM environment's.
        assert!(refusal("{'a': true}.?a.orValue(false)").contains("does not compile"));
    }

    #[test]
    fn the_shape_is_read_from_the_ast_so_a_raw_string_hides_nothing() {
        // The old text scanner took r"\" for an open string and counted nothing after it.
        let parens = format!("r\"\\\" == '' || {}true{}", "(".repeat(90), ")".repeat(90));
        assert_eq!(
            refusal(&parens),
            format!(
                "the CEL rule {} nests expressions more than 24 deep",
                quote(&parens)
            )
        );
        let chain = format!("r\"\\\" == '' || {}", vec!["true"; 500].join(" && "));
        assert_eq!(
            refusal(&chain),
            format!(
                "the CEL rule {} has 1003 expressions, over the limit of 400",
                quote(&chain)
            )
        );
        // `!!` folds away while parsing; a chain of field selections does not.
        let deep = format!("r\"\\\" == '' || properties{} == 1.0", ".a".repeat(1998));
        assert_eq!(
            refusal(&deep),
            format!(
                "the CEL rule {} is 2001 expressions deep, over the limit of 48",
                quote(&deep)
            )
        );
        let ternaries = "true ? true : ".repeat(30) + "false";
        assert!(refusal(&ternaries).ends_with("nests expressions more than 24 deep"));
        // Quoted rules are cut.
        assert!(quote(&deep).len() < 100 && quote(&deep).ends_with("...\""));
    }

    #[test]
    fn the_deepest_and_largest_accepted_rules_run_on_a_2_mib_stack() {
        let deepest = [
            format!("properties{} == 1.0", ".a".repeat(MAX_AST_DEPTH - 2)),
            format!("{}true{}", "(".repeat(23), ")".repeat(23)),
            format!(
                "properties.exists(p, {}p.type == 'a'{})",
                "[".repeat(20),
                "]".repeat(20)
            )
            .replace("p.type == 'a'", "p.type == 'a'")
            .replace(
                &format!("{}p.type == 'a'{})", "[".repeat(20), "]".repeat(20)),
                "p.type == 'a')",
            ),
            vec!["!!true"; 60].join(" && "),
        ];
        let rules: Vec<CelRule> = deepest.iter().map(|r| CelRule::compile(r).unwrap()).collect();
        let input = props("1.0.0");
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                for rule in &rules {
                    // Evaluated to the end, whatever the answer.
                    let _ = rule.matches(&input);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn strings_made_by_conversion_are_counted_whole_where_they_are_read() {
        // Concatenated conversions were once taken for numbers (size 1): the regex then ran
        // over 800 KB per element at the price of 2 bytes.
        let rule = r#"properties.map(p, p.type == "big", string(p.value) + string(p.value)).exists(s, s.matches('[ab]*a[ab]{1500}[^ab]'))"#;
        let error = CelRule::compile(rule).unwrap_err();
        assert!(error.contains("estimated worst-case cost"), "{error}");
        // Comparing a conversion stays cheap.
        let cheap = CelRule::compile(r#"properties.exists(p, string(p.value) == "x")"#).unwrap();
        assert!(
            cheap.estimated_cost() < MAX_COST / 10,
            "{}",
            cheap.estimated_cost()
        );
    }

    #[test]
    fn work_multiplied_by_nested_loops_is_refused_by_its_estimate() {
        // The issue's attack: list `+` inside nested comprehensions (~1e9 iterations).
        let product = "properties.all(a, (properties + properties + properties).all(b, a != b || true))";
        assert!(refused_cost(product) > 100 * MAX_COST);
        // Allocation without bound: `map` of string `+` over every property, twice nested.
        let allocation = "properties.map(p, properties.map(q, string(q.value) + string(p.value))).size() > 0";
        refused_cost(allocation);
        // A single pass over the properties, as real rules do, is well within.
        for ok in [
            r#"properties.exists(p, p.type == "certified")"#,
            r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "1.1.0") >= 0)"#,
            r#"properties.filter(p, p.type == "olm.gvk").size() >= 2"#,
            r#"properties.exists_one(p, p.type == "olm.package")"#,
            r#"properties.all(p, p.type != "olm.gvk" || p.value.group.endsWith(".example.com"))"#,
            r#"properties.exists(p, p.type == "olm.csv.metadata" && p.value.keywords.exists(k, k == "db"))"#,
            r#"properties.exists(p, p.type.matches("^olm\\.(gvk|package)$"))"#,
        ] {
            let rule = CelRule::compile(ok).unwrap_or_else(|e| panic!("{e}"));
            assert!(rule.estimated_cost() <= MAX_COST);
            assert!(rule.estimated_cost() > INPUT.size, "{ok}: reads every property");
        }
        // Constant rules cost little.
        assert!(CelRule::compile("true").unwrap().estimated_cost() < 10);
    }

    #[test]
    fn matches_is_ours_with_a_literal_pattern_compiled_once() {
        let before = PATTERN_COMPILES.with(|c| c.get());
        let rule = CelRule::compile(r#"properties.exists(p, p.type.matches("^olm\\.pack[a-z]+$"))"#).unwrap();
        let method = CelRule::compile(r#"properties.exists(p, matches(p.type, "^weigh"))"#).unwrap();
        let input = CelInput::new(&props("1.0.0"));
        for _ in 0..100 {
            assert!(rule.matches_input(&input));
            assert!(method.matches_input(&input));
        }
        assert_eq!(PATTERN_COMPILES.with(|c| c.get()) - before, 2);
        // Compiled again: the rule comes from the process's cache, its pattern with it.
        CelRule::compile(r#"properties.exists(p, p.type.matches("^olm\\.pack[a-z]+$"))"#).unwrap();
        assert_eq!(PATTERN_COMPILES.with(|c| c.get()) - before, 2);

        let dynamic = "properties.exists(p, p.type.matches(p.type))";
        assert_eq!(
            refusal(dynamic),
            format!("the CEL rule {dynamic:?} calls matches with a pattern that is not a string literal")
        );
        let long = format!("properties.exists(p, p.type.matches('{}'))", "a".repeat(600));
        assert_eq!(
            refusal(&long),
            format!(
                "the CEL rule {} has a matches pattern of 600 bytes, over the limit of 512",
                quote(&long)
            )
        );
        let huge = "properties.exists(p, p.type.matches('(((a{100}){100}){100})'))";
        assert!(
            refusal(huge).contains("that olmv1 cannot use"),
            "{}",
            refusal(huge)
        );
        let invalid = "properties.exists(p, p.type.matches('(olm'))";
        assert!(
            refusal(invalid).contains("that olmv1 cannot use"),
            "{}",
            refusal(invalid)
        );
        // A pattern's states multiply the bytes searched: `a{200}` over every type is over the budget.
        assert!(CelRule::compile("properties.exists(p, p.type.matches('a'))").is_ok());
        assert!(refused_cost("properties.exists(p, p.type.matches('a{200}'))") > 5 * MAX_COST);
    }

    #[test]
    fn a_bundle_converts_its_properties_once_for_many_rules() {
        use crate::dependencies::{BundleFacts, Constraint};
        let properties = props("1.0.0");
        let rules: Vec<Constraint> = (0..50)
            .map(|i| {
                Constraint::Cel(CelRule::compile(&format!("properties.exists(p, p.type == 'x{i}')")).unwrap())
            })
            .collect();
        let before = INPUT_CONVERSIONS.with(|c| c.get());
        let facts = BundleFacts::new("b", "p", &properties);
        let any = Constraint::Any(rules);
        assert!(!any.holds(&facts));
        assert!(!any.holds(&facts));
        assert_eq!(INPUT_CONVERSIONS.with(|c| c.get()) - before, 1);
        // The cost of the tree: its rules' estimates and 1 per node.
        let Constraint::Any(rules) = &any else {
            unreachable!()
        };
        let sum: u64 = rules.iter().map(Constraint::cost).sum();
        assert_eq!(any.cost(), sum + 1);
    }

    #[test]
    fn every_cel_rule_in_the_shared_catalogs_compiles() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/catalogs");
        let Ok(catalogs) = std::fs::read_dir(&root) else {
            eprintln!("no shared catalogs at {}", root.display());
            return;
        };
        let rule = regex::Regex::new(
            r#"(?m)"?cel"?:\s*\{?\s*"?rule"?:\s*("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\n}]+)"#,
        )
        .unwrap();
        let (mut files, mut found) = (0, 0);
        let mut stack: Vec<std::path::PathBuf> = catalogs.flatten().map(|e| e.path()).collect();
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().flatten().map(|e| e.path()));
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            files += 1;
            for m in rule.captures_iter(&text) {
                let raw = m[1].trim();
                let source = match raw.chars().next() {
                    Some('"') => serde_json::from_str::<String>(raw).unwrap(),
                    Some('\'') => raw[1..raw.len() - 1].replace("''", "'"),
                    _ => raw.to_string(),
                };
                found += 1;
                CelRule::compile(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
        assert!(files > 100, "read {files} catalog files");
        eprintln!("{found} CEL rules in {files} catalog files compile");
    }

    /// A source no other test compiles (the rule cache is the process's).
    fn unique(tag: &str) -> String {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        format!("{tag}{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    #[test]
    fn a_parser_error_is_one_short_sentence_made_at_the_source() {
        // 4,000 bad characters: the parser makes 4,000 errors, each with the whole line.
        let rule = format!("1 == {}", "#".repeat(4000));
        let e = refusal(&rule);
        assert!(e.len() < 400, "{} bytes: {e}", e.len());
        assert!(
            e.contains("does not compile: Syntax error: token recognition error at: '#' at 1:6 (and "),
            "{e}"
        );
        assert!(e.ends_with(" more errors)"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        // The parser's text quotes the bad character: escaped here, at the source.
        let e = refusal(&format!("1 == {}", "\u{1b}".repeat(100)));
        assert!(!e.chars().any(char::is_control), "{e:?}");
        // The whole text of the cached error is as short.
        let (bytes, _) = cache_usage();
        assert!(bytes <= MAX_CACHED_BYTES);
    }

    #[test]
    fn compiling_is_charged_once_then_cached() {
        let source = format!("'abc'.matches('(ab{}c){{100}}')", unique("charged"));
        let mut meter = Meter::unlimited();
        let rule = CelRule::compile_metered(&source, &mut meter).unwrap();
        assert_eq!(
            meter.spent_on(Work::CompileCel),
            (COMPILE_FIXED_BYTES + source.len() as u64) * Work::CompileCel.weight()
        );
        // The pattern's automaton, compiled once, and what it holds counted by the cache.
        let nfa = rule.0.patterns[0].vm.get_nfa().memory_usage();
        assert!(meter.spent_on(Work::CompileRegex) >= nfa as u64 * Work::CompileRegex.weight());
        assert!(rule.held_bytes() > nfa);
        assert_eq!(
            meter.spent_on(Work::Estimate),
            rule.0.nodes * Work::Estimate.weight()
        );
        // Again: the cache's answer, charged nothing.
        let mut again = Meter::unlimited();
        CelRule::compile_metered(&source, &mut again).unwrap();
        assert_eq!(again.spent(), 0);
    }

    #[test]
    fn a_pattern_compile_stops_at_what_the_meter_has_left() {
        let source = format!("'abc'.matches('(xy{}z){{1000}}')", unique("left"));
        // Enough to parse and check the rule, far from enough for its pattern's automaton.
        let limit = (COMPILE_FIXED_BYTES + source.len() as u64) * Work::CompileCel.weight() + 10_000;
        let mut meter = Meter::new(limit);
        assert_eq!(
            CelRule::compile_metered(&source, &mut meter).unwrap_err(),
            CompileError::Exhausted(Exhausted::Work { limit })
        );
        // Not cached as an error: with a meter that has enough, it compiles (and is charged).
        let mut enough = Meter::unlimited();
        CelRule::compile_metered(&source, &mut enough).unwrap();
        assert!(enough.spent_on(Work::CompileRegex) > 10_000);
    }

    #[test]
    fn the_rule_cache_holds_at_most_its_bytes_and_evicts_the_oldest() {
        // Rules whose eight patterns are each large: until the later ones hold more than the
        // cache may, the first must have been evicted.
        let tag = unique("evict");
        let source = |i: usize| {
            let tests: Vec<String> = (0..8)
                .map(|k| format!("'abc'.matches('(a{tag}b{i}c{k}){{400}}')"))
                .collect();
            tests.join(" || ")
        };
        let first = CelRule::compile(&source(0)).unwrap();
        let mut later = 0;
        let mut i = 1;
        while later <= MAX_CACHED_BYTES {
            later += CelRule::compile(&source(i)).unwrap().held_bytes() + source(i).len();
            assert!(cache_usage().0 <= MAX_CACHED_BYTES);
            i += 1;
        }
        assert!(first.held_bytes() > 8 * 4000, "{}", first.held_bytes());
        let mut meter = Meter::unlimited();
        CelRule::compile_metered(&source(0), &mut meter).unwrap();
        assert!(
            meter.spent_on(Work::CompileCel) > 0,
            "compiled again: it was evicted"
        );
    }

    #[test]
    fn a_rule_is_estimated_once_per_size_class_and_the_class_bounds_the_input() {
        let rule = CelRule::compile(&format!(
            "properties.exists(p, p.type == '{}' && p.value.version == '1')",
            unique("class")
        ))
        .unwrap();
        let (a, b) = (CelInput::new(&props("1.0.0")), CelInput::new(&props("1.0.1")));
        let mut meter = Meter::unlimited();
        let cost = rule.cost_for(&a, &mut meter).unwrap();
        let once = meter.spent_on(Work::Estimate);
        assert_eq!(once, rule.0.nodes * Work::Estimate.weight());
        // Another bundle of the same class: no walk.
        assert_eq!(rule.cost_for(&b, &mut meter).unwrap(), cost);
        assert_eq!(meter.spent_on(Work::Estimate), once);
        // The class's estimate bounds the bundle's own, and the rule's overall bound holds.
        let own = estimate(
            &rule.0.expression,
            &rule.0.patterns,
            input_bound(a.count, a.bytes),
        )
        .unwrap();
        assert!(own + EVALUATION_UNITS <= cost, "{own} {cost}");
        assert!(cost <= rule.estimated_cost() + EVALUATION_UNITS);
        // A bundle of another class is estimated again.
        let many: Vec<Property> = (0..100).flat_map(|_| props("1.0.0")).collect();
        rule.cost_for(&CelInput::new(&many), &mut meter).unwrap();
        assert_eq!(meter.spent_on(Work::Estimate), 2 * once);
    }

    #[test]
    fn large_inputs_match_nothing() {
        let many: Vec<Property> = (0..=MAX_INPUT_PROPERTIES).flat_map(|_| props("1.0.0")).collect();
        assert!(!CelRule::compile("true").unwrap().matches(&many));
        assert!(CelRule::compile("true").unwrap().matches(&props("1.0.0")));
    }
}
