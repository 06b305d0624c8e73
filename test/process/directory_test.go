package process

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// waitHealthcheck polls `ferrofed healthcheck` until it exits want, or fails after
// within.
func waitHealthcheck(t *testing.T, path string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, out := healthcheck(t, path)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthcheck exited %d, not %d, for %s: %s", code, want, within, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The built binary with [registry.mcsd]: ready once the directory's registry was
// accepted, the registry kept in the cache file; a restart with the directory down
// becomes ready from the cache and asks the cached members, and the drain stops the
// refresh loop in step 4.
func TestDirectoryRestartFromCache(t *testing.T) {
	const system = "urn:oid:1.3.6.1.4.1.21367.13.20.7000"
	dir := mcsdsupplier.Start(t, mcsdsupplier.Options{Knobs: double.Knobs{Fault: double.FaultRefused}})
	m := members.Start(t, members.Options{ID: "a"})
	dir.MustPut(t, mcsdsupplier.Endpoint("ep-a", m.URL), mcsdsupplier.Organization("org-a", system, "a", "ep-a"))

	tmp := t.TempDir()
	path := filepath.Join(tmp, "ferrofed.toml")
	cache := filepath.Join(tmp, "registry.json")
	port := freePort(t)
	writeFile(t, path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
termination_message_path = ""
[registry.mcsd]
url = %q
member_identifier_system = %q
refresh_interval_ms = 300
timeout_ms = 300
cache_file = %q
`, port, dir.URL, system, cache))

	// Never accepted, no cache, directory down: not ready.
	g := serve(t, path)
	time.Sleep(500 * time.Millisecond)
	if code, out := healthcheck(t, path); code != 1 {
		t.Fatalf("ready without any registry: %d %s", code, out)
	}
	// The directory answers: ready, and the registry cached.
	if err := dir.SetKnobs(double.Knobs{}); err != nil {
		t.Fatal(err)
	}
	waitHealthcheck(t, path, 0, 10*time.Second)
	if raw, err := os.ReadFile(cache); err != nil || !strings.Contains(string(raw), `"a-query"`) {
		t.Fatalf("the cache file holds %s (%v)", raw, err)
	}
	g.stop(t)
	g.waitLog(t, "BindingsStopped")

	// Restart with the directory down: ready from the cache at once.
	if err := dir.SetKnobs(double.Knobs{Fault: double.FaultRefused}); err != nil {
		t.Fatal(err)
	}
	g = serve(t, path)
	waitHealthcheck(t, path, 0, 3*time.Second)
	g.waitLog(t, "Serving the registry cached from the directory")
	before := m.Requests()
	res, err := clientGet(fmt.Sprintf("http://127.0.0.1:%d/fhir/Observation", port))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var b struct {
		Meta struct {
			Federation []struct{ ID, Outcome string } `json:"federation"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(raw, &b); err != nil || res.StatusCode != 200 || len(b.Meta.Federation) != 1 || b.Meta.Federation[0].Outcome != "ok" || m.Requests() == before {
		t.Fatalf("a search from the cached registry answered %d: %s", res.StatusCode, raw)
	}
	// The refreshes keep failing (down) and the gateway stays ready.
	g.waitLog(t, `"state":"down"`)
	if code, out := healthcheck(t, path); code != 0 {
		t.Fatalf("a directory outage made the gateway unready: %s", out)
	}
	g.stop(t)
	g.waitLog(t, "BindingsStopped")
}
