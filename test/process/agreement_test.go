package process

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// sample is one configuration of the repository's testdata, as a file to run in dir.
type sample struct {
	name, dir, file string
	// want is the file's own "# want: ok" or "# want: refused KEY", when it says.
	want string
}

// TestConfigCheckAndServeAgreeOnEveryTestdataConfiguration runs `ferrofed config
// check` and `ferrofed serve` on every configuration the repository's testdata holds
// (gateway/config/testdata/configs, the FuzzParse seeds, the ferrofed.toml of the
// operator's golden files, the compose example): a file one refuses, the other refuses
// too, and a file one accepts, the other accepts (serve listens). Files that say what
// they expect are held to it, and both commands must name the refused key. serve is
// stopped with SIGKILL once it listens: nothing is drained, written or pushed.
//
// Only server.listen is changed, in the files that are not this test's own, and only
// where it is a valid address: to 127.0.0.1:0, so that nothing binds a wildcard or a
// fixed port.
func TestConfigCheckAndServeAgreeOnEveryTestdataConfiguration(t *testing.T) {
	samples := append(testdataSamples(t), fileSamples(t)...)
	if len(samples) < 40 {
		t.Fatalf("only %d configurations found", len(samples))
	}
	accepted, refused := 0, 0
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			checkOK, checkOut := runCheck(t, s)
			serveOK, serveOut := runServe(t, s)
			if checkOK != serveOK {
				t.Fatalf("config check accepted=%v but serve accepted=%v\nconfig check:\n%s\nserve:\n%s", checkOK, serveOK, checkOut, serveOut)
			}
			if checkOK {
				accepted++
			} else {
				refused++
			}
			switch key, isRefusal := strings.CutPrefix(s.want, "refused "); {
			case s.want == "":
			case s.want == "ok" && !checkOK:
				t.Fatalf("refused, want ok:\n%s", checkOut)
			case isRefusal && checkOK:
				t.Fatalf("accepted, want %s", s.want)
			case isRefusal && (!strings.Contains(checkOut, key) || !strings.Contains(serveOut, key)):
				t.Fatalf("the refusals do not both name %s\nconfig check:\n%s\nserve:\n%s", key, checkOut, serveOut)
			}
		})
	}
	t.Logf("%d configurations: %d accepted by both, %d refused by both", len(samples), accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d accepted, %d refused: the samples do not exercise both verdicts", accepted, refused)
	}
}

// runCheck runs config check, for at most 15 s: a check that blocks (on a named pipe
// it opened) fails the test instead of hanging it.
func runCheck(t *testing.T, s sample) (bool, string) {
	t.Helper()
	cmd := exec.Command(binary, "config", "check", "--config", s.file)
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("config check neither accepted nor refused within 15 s (killed: %v)\n%s", <-exited, out.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, out.String()
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, out.String()
	}
	t.Fatalf("config check: %v\n%s", err, out.String())
	return false, ""
}

// runServe starts serve and reports whether it listened (it is then killed) or
// exited refusing the file.
func runServe(t *testing.T, s sample) (bool, string) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--config", s.file)
	cmd.Dir = s.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				listening <- struct{}{}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-listening:
		_ = cmd.Process.Kill()
		if err := <-exited; err == nil {
			t.Fatal("serve exited cleanly on SIGKILL")
		}
		return true, stderr.String()
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("serve exited with %v without listening\n%s", err, stderr.String())
		}
		return false, stderr.String()
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		err := <-exited
		t.Fatalf("serve neither listened nor exited (killed: %v)\n%s", err, stderr.String())
	}
	return false, ""
}

func testdataSamples(t *testing.T) []sample {
	t.Helper()
	var out []sample
	own, err := filepath.Glob(filepath.Join(repoRoot, "gateway/config/testdata/configs/*.toml"))
	if err != nil || len(own) == 0 {
		t.Fatalf("no gateway/config/testdata/configs: %v", err)
	}
	for _, f := range own {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(data), "\n")
		want, ok := strings.CutPrefix(first, "# want: ")
		if !ok {
			t.Fatalf("%s does not say what it expects on its first line", f)
		}
		out = append(out, sample{name: "configs/" + filepath.Base(f), dir: filepath.Dir(f), file: filepath.Base(f), want: want})
	}

	tmp := t.TempDir()
	add := func(name string, doc []byte) {
		file := strings.NewReplacer("/", "-", ".", "-").Replace(name) + ".toml"
		if err := os.WriteFile(filepath.Join(tmp, file), onLoopback(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, sample{name: name, dir: tmp, file: file})
	}
	seeds, _ := filepath.Glob(filepath.Join(repoRoot, "gateway/config/testdata/fuzz/FuzzParse/*"))
	for _, f := range seeds {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := fuzzBytes(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		add("FuzzParse/"+filepath.Base(f), doc)
	}
	goldens, _ := filepath.Glob(filepath.Join(repoRoot, "controllers/testdata/*.yaml"))
	for _, f := range goldens {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, part := range bytes.Split(data, []byte("\n---\n")) {
			var cm struct {
				Kind string            `json:"kind"`
				Data map[string]string `json:"data"`
			}
			if yaml.Unmarshal(part, &cm) != nil || cm.Kind != "ConfigMap" || cm.Data["ferrofed.toml"] == "" {
				continue
			}
			add("controllers/"+filepath.Base(f)+"/"+strconv.Itoa(i), []byte(cm.Data["ferrofed.toml"]))
		}
	}
	if len(goldens) == 0 || len(seeds) == 0 {
		t.Fatal("no golden files or no fuzz seeds found")
	}
	example, err := os.ReadFile(filepath.Join(repoRoot, "examples/compose/ferrofed.toml"))
	if err != nil {
		t.Fatal(err)
	}
	add("examples/compose/ferrofed.toml", example)
	return out
}

// fileSamples are configurations naming files that cannot be committed: a named pipe
// (FIFO) as each kind of file the gateway reads, and as the configuration itself. The
// open of a FIFO with no writer blocks; both commands must refuse it, naming its key,
// within the bound of runCheck and runServe.
func fileSamples(t *testing.T) []sample {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const head = "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\n"
	var out []sample
	for _, c := range []struct{ name, key, doc string }{
		{"page-token-key", "federation.page_token_key_file", "[federation]\npage_token_key_file = \"" + fifo + "\"\n"},
		{"jwks-file", "auth.issuers[0].jwks_file", "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_file = \"" + fifo + "\"\n"},
		{"tls-certificate", "server.tls.certificate_file", "[server.tls]\ncertificate_file = \"" + fifo + "\"\nkey_file = \"" + fifo + "\"\n"},
		{"consent-token", "consent.bearer_token_file", "[consent]\nurl = \"https://127.0.0.1:9/authzen\"\nbearer_token_file = \"" + fifo + "\"\n"},
		{"pdqm-ca", "pdqm.ca_file", "[pdqm]\nurl = \"https://127.0.0.1:9/fhir\"\nca_file = \"" + fifo + "\"\n"},
		{"mcsd-cache", "registry.mcsd.cache_file", "[registry.mcsd]\nurl = \"http://127.0.0.1:9/fhir\"\nmember_identifier_system = \"urn:oid:1.2.3\"\ncache_file = \"" + fifo + "\"\n"},
	} {
		file := "fifo-" + c.name + ".toml"
		if err := os.WriteFile(filepath.Join(dir, file), []byte(head+c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, sample{name: "fifo/" + c.name, dir: dir, file: file, want: "refused " + c.key})
	}
	// The configuration itself a named pipe: refused before anything is parsed.
	out = append(out, sample{name: "fifo/the-configuration", dir: dir, file: "fifo", want: "refused configuration"})
	return out
}

// fuzzBytes decodes a go test fuzz v1 corpus file of one []byte.
func fuzzBytes(data []byte) ([]byte, error) {
	_, rest, ok := bytes.Cut(data, []byte("\n"))
	lit, ok2 := strings.CutPrefix(strings.TrimSpace(string(rest)), "[]byte(")
	if !ok || !ok2 || !strings.HasSuffix(lit, ")") {
		return nil, errors.New("not a go test fuzz v1 file of one []byte")
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	return []byte(s), err
}

// onLoopback returns doc with server.listen set to 127.0.0.1:0 where the document is
// TOML and the address is valid (or unset: its default is every interface). An invalid
// address is left for both commands to refuse.
func onLoopback(doc []byte) []byte {
	m := map[string]any{}
	if toml.Unmarshal(doc, &m) != nil {
		return doc
	}
	srv, ok := m["server"].(map[string]any)
	if _, present := m["server"]; present && !ok {
		return doc
	}
	if srv == nil {
		srv = map[string]any{}
		m["server"] = srv
	}
	if l, set := srv["listen"]; set {
		addr, isString := l.(string)
		if !isString {
			return doc
		}
		if _, port, err := net.SplitHostPort(addr); err != nil {
			return doc
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return doc
		}
	}
	srv["listen"] = "127.0.0.1:0"
	out, err := toml.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}
