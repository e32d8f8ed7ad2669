package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the module's root directory.
const root = "../.."

// publicDirs returns the directories of the module's public packages:
// everything but internal/, cmd/, examples/, interop/ and testdata.
func publicDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch n := d.Name(); {
		case p == root:
		case n == "internal" || n == "cmd" || n == "examples" || n == "interop" || n == "testdata" || strings.HasPrefix(n, "."):
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
			dirs = append(dirs, p)
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(dirs)
	return dirs
}

// generated reports whether f carries the "Code generated … DO NOT EDIT."
// line (stringer's String methods).
func generated(f *ast.File) bool {
	for _, c := range f.Comments {
		if t := c.Text(); strings.HasPrefix(t, "Code generated ") && strings.Contains(t, "DO NOT EDIT") {
			return true
		}
	}
	return false
}

// startsWith reports whether doc's first sentence starts with name (for a
// type also after "A", "An" or "The").
func startsWith(doc *ast.CommentGroup, name string, articles bool) bool {
	text := doc.Text()
	prefixes := []string{""}
	if articles {
		prefixes = append(prefixes, "A ", "An ", "The ")
	}
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(text, p+name)
		if ok && rest != "" && strings.ContainsRune(" ,.:;'\n", rune(rest[0])) {
			return true
		}
	}
	return false
}

// TestGoDoc checks every public package: one package comment, in doc.go,
// starting "Package NAME "; an Example function in its tests; a doc comment
// on every exported function, method of an exported type, type, constant,
// variable and interface method, which for functions, methods and types
// starts with the name. Generated files are left out.
func TestGoDoc(t *testing.T) {
	dirs := publicDirs(t)
	require.Greater(t, len(dirs), 20, "the walk found too few packages")
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		t.Run(rel, func(t *testing.T) {
			fset := token.NewFileSet()
			paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
			require.NoError(t, err)
			files := map[string]*ast.File{} // the package's own files, every build tag
			examples := 0
			for _, p := range paths {
				f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
				require.NoError(t, err)
				if !strings.HasSuffix(p, "_test.go") {
					files[p] = f
					continue
				}
				for _, d := range f.Decls {
					if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example") {
						examples++
					}
				}
			}
			require.NotEmpty(t, files, "no package")
			assert.Positive(t, examples, "no runnable Example in the tests")
			checkPackage(t, fset, files)
		})
	}
}

// checkPackage checks the package comment and the exported names of a
// package's non-test files, keyed by path.
func checkPackage(t *testing.T, fset *token.FileSet, pkg map[string]*ast.File) {
	at := func(p token.Pos) string {
		pos := fset.Position(p)
		return filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line)
	}
	exportedType := map[string]bool{}
	var docFiles []string
	var files []string
	for fn := range pkg {
		files = append(files, fn)
	}
	sort.Strings(files)
	for _, fn := range files {
		f := pkg[fn]
		if f.Doc != nil {
			docFiles = append(docFiles, filepath.Base(fn))
			assert.True(t, strings.HasPrefix(f.Doc.Text(), "Package "+f.Name.Name+" "),
				"%s: the package comment does not start \"Package %s \"", at(f.Package), f.Name.Name)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
						exportedType[ts.Name.Name] = true
					}
				}
			}
		}
	}
	assert.Equal(t, []string{"doc.go"}, docFiles, "the package comment belongs in doc.go, once")
	for _, fn := range files {
		f := pkg[fn]
		if generated(f) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if s, ok := recv.(*ast.StarExpr); ok {
						recv = s.X
					}
					if ix, ok := recv.(*ast.IndexExpr); ok {
						recv = ix.X
					}
					id, ok := recv.(*ast.Ident)
					if !ok || !exportedType[id.Name] {
						continue // go doc does not show it
					}
					name = id.Name + "." + name
				}
				if assert.NotNil(t, d.Doc, "%s: %s has no doc comment", at(d.Pos()), name) {
					assert.True(t, startsWith(d.Doc, d.Name.Name, false), "%s: the doc of %s does not start with its name", at(d.Pos()), name)
				}
			case *ast.GenDecl:
				checkGenDecl(t, d, at)
			}
		}
	}
}

// checkGenDecl checks the exported types, constants and variables of d.
func checkGenDecl(t *testing.T, d *ast.GenDecl, at func(token.Pos) string) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if !s.Name.IsExported() {
				continue
			}
			doc := s.Doc
			if doc == nil && len(d.Specs) == 1 {
				doc = d.Doc
			}
			if assert.NotNil(t, doc, "%s: type %s has no doc comment", at(s.Pos()), s.Name.Name) {
				assert.True(t, startsWith(doc, s.Name.Name, true), "%s: the doc of type %s does not start with its name", at(s.Pos()), s.Name.Name)
			}
			if it, ok := s.Type.(*ast.InterfaceType); ok {
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						if n.IsExported() {
							assert.True(t, m.Doc != nil || m.Comment != nil, "%s: method %s.%s has no comment", at(n.Pos()), s.Name.Name, n.Name)
						}
					}
				}
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					assert.True(t, s.Doc != nil || s.Comment != nil || d.Doc != nil, "%s: %s has no doc comment", at(n.Pos()), n.Name)
				}
			}
		}
	}
}
