package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlantedLicence runs the check as a real process over a module that
// depends on three local modules: one MIT (allowed), one GPL-3.0 (planted,
// refused) and one with no licence file (refused).
func TestPlantedLicence(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "licenses")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	gpl, err := os.ReadFile("testdata/GPL-3.0.txt")
	if err != nil {
		t.Fatal(err)
	}
	mit := []byte(`Copyright (c) 2026 Example

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
`)
	root := t.TempDir()
	write := func(rel string, data []byte) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("app/go.mod", []byte(`module example.com/app

go 1.22

require (
	example.com/mitlib v0.0.0
	example.com/gpllib v0.0.0
	example.com/nolicence v0.0.0
)

replace (
	example.com/mitlib => ../mitlib
	example.com/gpllib => ../gpllib
	example.com/nolicence => ../nolicence
)
`))
	write("app/LICENSE", mit)
	write("app/main.go", []byte(`package main

import (
	_ "example.com/gpllib"
	_ "example.com/mitlib"
	_ "example.com/nolicence"
)

func main() {}
`))
	for name, lic := range map[string][]byte{"mitlib": mit, "gpllib": gpl, "nolicence": nil} {
		write(name+"/go.mod", []byte("module example.com/"+name+"\n\ngo 1.22\n"))
		write(name+"/lib.go", []byte("package "+name+"\n"))
		if lic != nil {
			write(name+"/LICENSE", lic)
		}
	}

	cmd := exec.Command(bin, "-C", filepath.Join(root, "app"), "./...")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if code := exitCode(err); code != 1 {
		t.Fatalf("exit code %d, want 1 (a refused licence)\n%s", code, text)
	}
	for _, want := range []string{
		"FAIL example.com/gpllib v0.0.0: GPL-3.0",
		"LICENSE: GPL-3.0 is not allowed",
		"FAIL example.com/nolicence v0.0.0:  -- no licence file",
		"ok   example.com/mitlib v0.0.0: MIT (LICENSE)",
		"ok   example.com/app (this module): MIT (LICENSE)",
		"2 of 4 modules",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

func TestExceptionsParse(t *testing.T) {
	ex, err := parseExceptions(exceptionsText)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) == 0 {
		t.Fatal("no exceptions parsed from exceptions.txt")
	}
	if _, err := parseExceptions("example.com/x LICENSE\n"); err == nil {
		t.Error("a line without a sum and a reason was accepted")
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
