//! The CEL environment of `olm.constraint` `cel` rules, as operator-framework/api defines it:
//! the `properties` variable and `semver_compare`, with bounds on the rule and its inputs.

use std::{collections::HashMap, fmt, sync::Arc};

use cel::{
    Context, ExecutionError, Program, Value,
    common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators},
};

use crate::{catalog::Property, go_format::go_float, version::cmp_precedence};

/// The longest rule compiled.
const MAX_RULE_BYTES: usize = 4096;
/// The deepest nesting of comprehensions (`exists`, `all`, `map`, ...): each level multiplies the
/// work by the size of a list.
const MAX_COMPREHENSION_DEPTH: usize = 2;
/// The deepest nesting of brackets and conditionals, and the most operators, a rule may have:
/// cel-rust's parser and evaluator recurse on them, and a thread's stack is small.
const MAX_NESTING: usize = 12;
const MAX_OPERATORS: usize = 256;
/// A candidate with more properties than this, or more JSON, matches no rule.
const MAX_INPUT_PROPERTIES: usize = 512;
const MAX_INPUT_BYTES: usize = 512 * 1024;

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

/// A compiled rule: it parsed, names only `properties`, and is of type bool.
#[derive(Clone)]
pub struct CelRule {
    source: Arc<str>,
    program: Arc<Program>,
}

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CelRule").field(&self.source).finish()
    }
}

impl CelRule {
    /// Compiles a rule; the error says why it is not a valid boolean rule over `properties`.
    pub fn compile(source: &str) -> Result<CelRule, String> {
        if source.len() > MAX_RULE_BYTES {
            return Err(format!(
                "the CEL rule is {} bytes, over the limit of {MAX_RULE_BYTES}",
                source.len()
            ));
        }
        if source.trim().is_empty() {
            return Err("the CEL rule is empty".to_string());
        }
        shape(source)?;
        let program = parse(source)?;
        let mut scope = vec!["properties".to_string()];
        check(program.expression(), &mut scope, 0).map_err(|e| format!("the CEL rule {source:?}: {e}"))?;
        if infer(program.expression(), &mut Vec::new()) != Type::Bool {
            return Err(format!("the CEL rule {source:?} must be of type bool"));
        }
        Ok(CelRule {
            source: Arc::from(source),
            program: Arc::new(program),
        })
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the rule is true for a bundle with these properties; an evaluation error, a
    /// non-boolean result or inputs over the bounds mean no.
    pub fn matches(&self, properties: &[Property]) -> bool {
        if properties.len() > MAX_INPUT_PROPERTIES
            || properties
                .iter()
                .map(|p| p.type_.len() + p.value.raw().len())
                .sum::<usize>()
                > MAX_INPUT_BYTES
        {
            return false;
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
        let mut context = Context::default();
        context.add_variable_from_value("properties", Value::List(Arc::new(list)));
        if context
            .add_function(
                "semver_compare",
                |a: Value, b: Value| -> Result<Value, ExecutionError> {
                    let (a, b) = (sprint(&a)?, sprint(&b)?);
                    semver_compare(&a, &b)
                        .map(Value::Int)
                        .map_err(|e| ExecutionError::function_error("semver_compare", e))
                },
            )
            .is_err()
        {
            return false;
        }
        matches!(self.program.execute(&context), Ok(Value::Bool(true)))
    }
}

/// Parses on a thread of its own: cel-rust's ANTLR parser takes a lot of stack per nesting level
/// (more than a test thread's 2 MiB for 12 levels in a debug build).
fn parse(source: &str) -> Result<Program, String> {
    const PARSER_STACK_BYTES: usize = 64 << 20;
    let text = source.to_string();
    let parsed = std::thread::Builder::new()
        .name("cel-parse".to_string())
        .stack_size(PARSER_STACK_BYTES)
        .spawn(move || Program::compile(&text).map_err(|e| e.to_string()))
        .map_err(|e| format!("the CEL parser could not start: {e}"))?
        .join()
        .map_err(|_| format!("the CEL rule {source:?} made the parser fail"))?;
    parsed.map_err(|e| format!("the CEL rule {source:?} does not compile: {}", e.trim()))
}

/// Checks nesting and operator count on the text, before the parser recurses on it. Brackets
/// and `?` open a level (a conditional nests its else branch); string literals are skipped.
fn shape(source: &str) -> Result<(), String> {
    let (mut depth, mut deepest, mut conditionals, mut operators) = (0usize, 0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in source.chars() {
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '?' => conditionals += 1,
            _ => {}
        }
        if "!-+*/%<>=&|.?,:".contains(c) {
            operators += 1;
        }
        deepest = deepest.max(depth + conditionals);
    }
    if deepest > MAX_NESTING {
        return Err(format!(
            "the CEL rule nests brackets and conditionals more than {MAX_NESTING} deep"
        ));
    }
    if operators > MAX_OPERATORS {
        return Err(format!("the CEL rule has more than {MAX_OPERATORS} operators"));
    }
    Ok(())
}

/// Go's `fmt.Sprint` of a CEL value's Go value, for the scalars a rule passes to `semver_compare`.
fn sprint(value: &Value) -> Result<String, ExecutionError> {
    Ok(match value {
        Value::String(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => go_float(*f),
        Value::Bool(b) => b.to_string(),
        other => {
            return Err(ExecutionError::function_error(
                "semver_compare",
                format!("unable to parse '{other:?}' to semver format"),
            ));
        }
    })
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

    #[test]
    fn rules_are_bounded_and_typed() {
        assert!(
            CelRule::compile("1 + 1")
                .unwrap_err()
                .contains("must be of type bool")
        );
        assert!(
            CelRule::compile("properties[0].value")
                .unwrap_err()
                .contains("must be of type bool")
        );
        assert!(
            CelRule::compile("unknown_fn(properties)")
                .unwrap_err()
                .contains("undeclared reference")
        );
        assert!(
            CelRule::compile(&"a".repeat(MAX_RULE_BYTES + 1))
                .unwrap_err()
                .contains("over the limit")
        );
        let nested = "properties.exists(a, properties.exists(b, properties.exists(c, true)))";
        assert!(
            CelRule::compile(nested)
                .unwrap_err()
                .contains("nested more than 2")
        );
        let parens = format!("{}true{}", "(".repeat(1000), ")".repeat(1000));
        assert!(
            CelRule::compile(&parens)
                .unwrap_err()
                .contains("more than 12 deep")
        );
        let ternaries = "true ? true : ".repeat(20) + "false";
        assert!(
            CelRule::compile(&ternaries)
                .unwrap_err()
                .contains("more than 12 deep")
        );
        let chain = vec!["true"; 500].join(" && ");
        assert!(
            CelRule::compile(&chain)
                .unwrap_err()
                .contains("more than 256 operators")
        );
        // The largest shapes allowed compile and run on a test thread's stack.
        let allowed = format!("{}true{}", "(".repeat(12), ")".repeat(12));
        let allowed = CelRule::compile(&allowed).unwrap();
        assert!(allowed.matches(&props("1.0.0")));
        let long = vec!["!!true"; 60].join(" && ");
        assert!(CelRule::compile(&long).unwrap().matches(&props("1.0.0")));
        let nots = format!("{}true", "!".repeat(256));
        assert!(CelRule::compile(&nots).unwrap().matches(&props("1.0.0")));
        let many: Vec<Property> = (0..=MAX_INPUT_PROPERTIES).flat_map(|_| props("1.0.0")).collect();
        assert!(!CelRule::compile("true").unwrap().matches(&many));
    }
}
