//! One crate's module tree, read from its source files with `syn`: which file each
//! module lives in, the names each module defines, and the names it imports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module of the crate (file modules and inline `mod x { .. }` blocks alike).
#[derive(Debug, Default)]
pub(crate) struct Module {
    /// The file the module's items are written in.
    pub(crate) file: usize,
    /// The enclosing module (`super`); `None` for the crate root.
    pub(crate) parent: Option<usize>,
    /// Child modules by name.
    pub(crate) children: BTreeMap<String, usize>,
    /// Items defined here (fn, struct, trait, ...) and the file that defines them.
    pub(crate) items: BTreeMap<String, usize>,
    /// `use` imports by the name they bind: the path, and whether the import is private
    /// (a `pub`/`pub(crate)` import is a re-export: a name, not a dependency of its own).
    pub(crate) imports: BTreeMap<String, (Vec<String>, bool)>,
    /// Glob imports (`use a::b::*`): the path before the `*`.
    pub(crate) globs: Vec<Vec<String>>,
}

/// A path written in a file: a `use` or a path in code, in the module it is written in.
#[derive(Debug)]
pub(crate) struct Reference {
    /// The module the path is written in.
    pub(crate) module: usize,
    /// The path's segments as written (`crate`, `super`, `self` kept).
    pub(crate) segments: Vec<String>,
    /// Line in the file.
    pub(crate) line: usize,
    /// A glob import (`use a::*`).
    pub(crate) is_glob: bool,
}

/// One crate (one target: a library, a binary, a test...) read from its root file.
#[derive(Debug, Default)]
pub(crate) struct Crate {
    /// Source files, by index.
    pub(crate) files: Vec<PathBuf>,
    /// The file of each file's parent module (`None` for the root file).
    pub(crate) parent_file: Vec<Option<usize>>,
    /// Modules; 0 is the crate root.
    pub(crate) modules: Vec<Module>,
    /// Paths written in each module.
    pub(crate) references: Vec<Reference>,
}

impl Crate {
    /// Reads the crate whose root file is `root` and every file its `mod` declarations name.
    pub(crate) fn read(root: &Path) -> Result<Crate, String> {
        let mut krate = Crate::default();
        krate.modules.push(Module::default());
        let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        krate.read_file(root, 0, &dir)?;
        Ok(krate)
    }

    /// Reads the file of module `module`, whose child modules' files are under `child_dir`.
    fn read_file(&mut self, file: &Path, module: usize, child_dir: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
        let parsed =
            syn::parse_file(&text).map_err(|e| format!("{}: cannot parse: {e}", file.display()))?;
        let file_id = self.files.len();
        self.files.push(file.to_path_buf());
        let parent_file = self.modules[module].parent.map(|p| self.modules[p].file);
        self.parent_file.push(parent_file);
        self.modules[module].file = file_id;
        self.read_items(&parsed.items, module, file, child_dir)
    }

    fn read_items(
        &mut self,
        items: &[syn::Item],
        module: usize,
        file: &Path,
        child_dir: &Path,
    ) -> Result<(), String> {
        let file_id = self.modules[module].file;
        for item in items {
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let child = self.modules.len();
                    self.modules.push(Module {
                        file: file_id,
                        parent: Some(module),
                        ..Module::default()
                    });
                    self.modules[module].children.insert(name.clone(), child);
                    if let Some((_, inline)) = &m.content {
                        self.read_items(inline, child, file, &child_dir.join(&name))?;
                    } else {
                        let (child_file, grand_dir) = module_file(m, &name, file, child_dir)?;
                        self.read_file(&child_file, child, &grand_dir)?;
                    }
                }
                syn::Item::Use(u) => {
                    let private = matches!(u.vis, syn::Visibility::Inherited);
                    let mut flat = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut flat);
                    let line = u.use_token.span.start().line;
                    for (segments, bound) in flat {
                        let is_glob = bound.is_none();
                        match bound {
                            Some(name) if name == "_" => {}
                            Some(name) => {
                                let import = (segments.clone(), private);
                                self.modules[module].imports.insert(name, import);
                            }
                            None => self.modules[module].globs.push(segments.clone()),
                        }
                        if private {
                            self.references.push(Reference {
                                module,
                                segments,
                                line,
                                is_glob,
                            });
                        }
                    }
                }
                other => {
                    if let Some(name) = item_name(other) {
                        let home = if is_macro_export(other) { 0 } else { module };
                        self.modules[home].items.insert(name, file_id);
                    }
                    let mut paths = PathCollector::default();
                    paths.visit_item(other);
                    for (segments, line) in paths.paths {
                        self.references.push(Reference {
                            module,
                            segments,
                            line,
                            is_glob: false,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `ancestor` is the file of a module enclosing the modules of `file`.
    pub(crate) fn is_ancestor(&self, ancestor: usize, file: usize) -> bool {
        let mut at = self.parent_file[file];
        while let Some(up) = at {
            if up == ancestor {
                return true;
            }
            at = self.parent_file[up];
        }
        false
    }
}

/// The file of `mod name;` declared in `file`, and the directory of its own children.
fn module_file(
    m: &syn::ItemMod,
    name: &str,
    file: &Path,
    child_dir: &Path,
) -> Result<(PathBuf, PathBuf), String> {
    for attr in &m.attrs {
        if attr.path().is_ident("path")
            && let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            let dir = file.parent().unwrap_or(Path::new("."));
            let target = dir.join(s.value());
            let grand = target.parent().unwrap_or(Path::new(".")).to_path_buf();
            return Ok((target, grand));
        }
    }
    let flat = child_dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Ok((flat, child_dir.join(name)));
    }
    let nested = child_dir.join(name).join("mod.rs");
    if nested.is_file() {
        return Ok((nested, child_dir.join(name)));
    }
    Err(format!(
        "{}: `mod {name};` names neither {} nor {}",
        file.display(),
        flat.display(),
        nested.display()
    ))
}

/// Flattens a use tree into (path, bound name); a glob gives (path before `*`, None).
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let bound = prefix.last().cloned();
                out.push((prefix.clone(), bound));
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            let name = r.ident.to_string();
            if name != "self" {
                path.push(name);
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// The name an item defines in its module's namespace, if any.
fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// `#[macro_export] macro_rules!`: the macro is named at the crate root.
fn is_macro_export(item: &syn::Item) -> bool {
    matches!(item, syn::Item::Macro(m) if m.attrs.iter().any(|a| a.path().is_ident("macro_export")))
}

/// Every path written in an item (types, expressions, patterns, macro names, nested
/// `use`s in function bodies), with its line.
#[derive(Default)]
struct PathCollector {
    paths: Vec<(Vec<String>, usize)>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.paths.push((segments, line));
        syn::visit::visit_path(self, path);
    }

    /// `pub(crate)`, `pub(super)`, `pub(in path)` name who may see, not what is used.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut flat);
        let line = u.use_token.span.start().line;
        for (segments, _) in flat {
            self.paths.push((segments, line));
        }
    }
}
