package launch_test

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gridweave.dev/rayctl/launch"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func zipNames(t *testing.T, p *launch.Package) []string {
	t.Helper()
	r, err := zip.NewReader(bytes.NewReader(p.Zip), int64(len(p.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	return names
}

// TestPackageDirSendsOnlyWhatChanged: each Python package is a py_modules
// package of its own, the rest the working dir; the same files give the
// same URIs; an edit changes only the URI of the package it touches;
// caches and version control are left out.
func TestPackageDirSendsOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"train.py": "import trainer\n", "config.yaml": "lr: 0.1\n",
		"trainer/__init__.py": "", "trainer/loop.py": "def run(): pass\n", "trainer/__pycache__/loop.cpython-312.pyc": "junk",
		"rewards/__init__.py": "", "rewards/swe.py": "def score(): return 1\n",
		".git/HEAD": "ref: refs/heads/main\n", "data/notes.txt": "not a package\n",
		".env": "HF_TOKEN=hf_secret\n", "trainer/.env.local": "WANDB_API_KEY=x\n", "keys/id_ed25519": "PRIVATE", "tls.pem": "PRIVATE",
		".aws/credentials": "[default]", "data/big.bin": "ignored by .rayignore", ".rayignore": "# large files\n*.bin\n",
	})
	wd, mods, err := launch.PackageDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := zipNames(t, wd); !slices.Equal(got, []string{".rayignore", "config.yaml", "data/notes.txt", "train.py"}) {
		t.Errorf("working dir package holds %v", got)
	}
	if len(mods) != 2 || mods[0].Module != "rewards" || mods[1].Module != "trainer" {
		t.Fatalf("modules %+v", mods)
	}
	if got := zipNames(t, mods[1]); !slices.Equal(got, []string{"trainer/__init__.py", "trainer/loop.py"}) {
		t.Errorf("trainer package holds %v", got)
	}
	wd2, mods2, _ := launch.PackageDir(dir)
	if wd2.URI != wd.URI || mods2[0].URI != mods[0].URI || mods2[1].URI != mods[1].URI || !bytes.Equal(wd2.Zip, wd.Zip) {
		t.Error("the same files gave other packages")
	}
	writeTree(t, dir, map[string]string{"trainer/loop.py": "def run(): return 2\n"})
	wd3, mods3, _ := launch.PackageDir(dir)
	if wd3.URI != wd.URI || mods3[0].URI != mods[0].URI {
		t.Error("an edit of trainer changed the other packages")
	}
	if mods3[1].URI == mods[1].URI {
		t.Error("an edit of trainer kept its URI")
	}
}
