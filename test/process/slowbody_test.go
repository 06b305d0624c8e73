package process

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// Issue 30, point 1: clients that send a routed POST head with Content-Length: 5 and
// never the body took one of the member's call slots each for the whole request
// timeout, so that the member's other clients waited for a 504 and the member ended
// `down` though it never failed. These tests run 4x limits.max_member_calls_per_member
// such clients against the built binary and a real member on loopback.

const (
	slowPerMember = 4
	slowClients   = 4 * slowPerMember
	// slowTimeout is server.request_timeout_ms: how long a slow client is held.
	slowTimeout = 4 * time.Second
	// victimBudget is what every other client waits for its answer: half the request
	// timeout, well before any slow client lets go.
	victimBudget = slowTimeout / 2
)

// slowBodyGateway starts a member and a gateway routing to it with
// max_member_calls_per_member = slowPerMember.
func slowBodyGateway(t *testing.T) (string, *gateway) {
	t.Helper()
	m := members.Start(t, members.Options{ID: "node-a"})
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
base_path = "/"
request_timeout_ms = %d
drain_delay_ms = 300
termination_message_path = ""
[limits]
max_member_calls_per_member = %d
[[registry.members]]
id = "node-a"
query_endpoint = %q
`, port, slowTimeout.Milliseconds(), slowPerMember, m.URL))
	g := serve(t, path)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(t, base)
	return base, g
}

// slowBodies opens n connections that each send a routed form POST head announcing a
// 5-byte body and never send it. Each connection's answer status (0: none) arrives on
// the returned channel.
func slowBodies(t *testing.T, base string, n int) <-chan int {
	t.Helper()
	host := strings.TrimPrefix(base, "http://")
	answers := make(chan int, n)
	for range n {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		head := "POST /nodes/node-a/fhir/Patient/_search HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer " + clientToken + "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\n\r\n"
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(3 * slowTimeout))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answers <- 0
				return
			}
			res.Body.Close()
			answers <- res.StatusCode
		}()
	}
	// Their heads are read and their handlers running (before the fix: each holding
	// a slot of node-a).
	time.Sleep(300 * time.Millisecond)
	return answers
}

// memberState reads node-a's state from the gateway's metrics.
func memberState(t *testing.T, base string) string {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "ferrofed_dependency_state{") && strings.Contains(line, `endpoint="node-a-query"`) && strings.HasSuffix(line, " 1") {
			_, s, _ := strings.Cut(line, `state="`)
			s, _, _ = strings.Cut(s, `"`)
			return s
		}
	}
	return "absent"
}

// victim GETs url within victimBudget and returns its status (0: no answer in time).
func victim(client *http.Client, url string) int {
	res, err := client.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestSlowBodiesHoldNoSlotOfTheMember(t *testing.T) {
	base, _ := slowBodyGateway(t)
	// The member is seen up once.
	client := &http.Client{Timeout: victimBudget, Transport: authorized(nil)}
	if s := victim(client, base+"/nodes/node-a/fhir/Patient/1"); s != 200 {
		t.Fatalf("before the attack: %d", s)
	}
	answers := slowBodies(t, base, slowClients)

	urls := []string{base + "/fhir/Patient"}
	for i := range 2 * slowPerMember {
		urls = append(urls, fmt.Sprintf("%s/nodes/node-a/fhir/Patient/%d", base, i+1))
	}
	statuses := make([]int, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { statuses[i] = victim(client, u) })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("%s under %d slow clients: %d (0: no answer within %s)", strings.TrimPrefix(urls[i], base), slowClients, s, victimBudget)
		}
	}
	if s := memberState(t, base); s != "up" {
		t.Errorf("node-a is %s under the attack, want up", s)
	}
	// Each slow client is the client's 408; the member keeps its state after.
	for range slowClients {
		if s := <-answers; s != http.StatusRequestTimeout {
			t.Errorf("a slow client was answered %d, want 408", s)
		}
	}
	if s := memberState(t, base); s != "up" {
		t.Errorf("node-a is %s once the slow clients were answered, want up", s)
	}
}

// Under the same attack, SIGTERM: every request that was sent before it is answered
// 200, none 504, none dropped.
func TestADrainUnderSlowBodiesDropsNothingThatArrivedBeforeSIGTERM(t *testing.T) {
	base, g := slowBodyGateway(t)
	answers := slowBodies(t, base, slowClients)

	type sent struct {
		at     time.Time
		status int
	}
	var (
		mu    sync.Mutex
		log   []sent
		sigAt time.Time
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range slowPerMember {
		wg.Go(func() {
			client := &http.Client{Timeout: victimBudget, Transport: authorized(nil)}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				at := time.Now()
				s := victim(client, fmt.Sprintf("%s/nodes/node-a/fhir/Patient/%d", base, w*1000+i))
				mu.Lock()
				log = append(log, sent{at, s})
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	sigAt = time.Now()
	mu.Unlock()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	select {
	case <-g.exited:
		if g.err != nil {
			t.Fatalf("serve exited with %v after SIGTERM", g.err)
		}
	case <-time.After(3 * slowTimeout):
		t.Fatal("serve did not exit after SIGTERM")
	}
	before := 0
	for _, s := range log {
		if s.at.Before(sigAt) {
			before++
			if s.status != 200 {
				t.Errorf("a request sent %s before SIGTERM was answered %d (0: none within %s)", sigAt.Sub(s.at).Round(time.Millisecond), s.status, victimBudget)
			}
		}
	}
	if before < slowPerMember {
		t.Fatalf("only %d requests were sent before SIGTERM", before)
	}
	for range slowClients {
		if s := <-answers; s != http.StatusRequestTimeout && s != 0 {
			t.Errorf("a slow client was answered %d, want 408 (or its connection closed by the drain)", s)
		}
	}
}
