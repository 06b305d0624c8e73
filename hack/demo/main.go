// Command demo holds the parts of `make demo` (hack/demo.sh) that are better written in
// Go than in bash:
//
//	demo controlplane --assets bin/k8s --kubeconfig F   start kube-apiserver and etcd (envtest),
//	                                                    write an admin kubeconfig to F, and keep
//	                                                    them up until SIGINT or SIGTERM
//	demo token --dir D --issuer I --audience A --scope S [--client-out F --client-scope C]
//	                                                    make a demo issuer: an ES256 key, its
//	                                                    JWKS in D/jwks.json, and print an
//	                                                    operator token; with --client-out, a
//	                                                    data-plane client's token in F too
//	demo drainlog FILE                                  print the drain steps of a gateway's log
//	demo get URL [BEARER]                               GET a URL; print the status and the body
//	demo freeport                                       print a free TCP port on 127.0.0.1
//	demo local --kubeconfig F ...                       on the real node (local.go): members as
//	                                                    pods, the sample Gateway and its copy with
//	                                                    drainDelay 0s, the routes through the
//	                                                    Service, a rolling restart of each under
//	                                                    load, with summary lines
//
// Nothing here is used by the gateway or the operator themselves.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo controlplane|token|drainlog|get|freeport|local ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "controlplane":
		err = controlPlane(os.Args[2:])
	case "token":
		err = token(os.Args[2:])
	case "drainlog":
		err = drainLog(os.Args[2:])
	case "get":
		err = get(os.Args[2:])
	case "freeport":
		err = freePort()
	case "local":
		err = local(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// controlPlane runs envtest's control plane until interrupted. envtest starts etcd and
// kube-apiserver as child processes with their data in temporary folders, and removes
// both when it stops.
func controlPlane(args []string) error {
	fs := flag.NewFlagSet("controlplane", flag.ExitOnError)
	assets := fs.String("assets", "bin/k8s", "folder of kube-apiserver and etcd")
	kubeconfig := fs.String("kubeconfig", ".demo/kubeconfig", "where to write the admin kubeconfig")
	_ = fs.Parse(args)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &envtest.Environment{BinaryAssetsDirectory: *assets}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver and etcd from %s: %w", *assets, err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stop the control plane:", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add the admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	// Written whole, then renamed: the script waits for the file to appear.
	tmp := *kubeconfig + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, *kubeconfig); err != nil {
		return err
	}
	fmt.Printf("control plane up at %s\n", user.Config().Host)
	<-ctx.Done()
	_ = os.Remove(*kubeconfig)
	return nil
}

// token makes a demo issuer: a fresh ES256 key whose public half goes to D/jwks.json
// (the gateway's [[auth.issuers]] jwks_file), and prints a token it signed, valid for a
// day, carrying the operator scope. Every call makes a new key, so the data plane's
// client token (auth.data_plane = "required"), when asked for with --client-out, is
// signed by the same call: sub "demo-app", with the SMART scopes of --client-scope.
func token(args []string) error {
	fs := flag.NewFlagSet("token", flag.ExitOnError)
	dir := fs.String("dir", ".demo", "where to write jwks.json")
	issuer := fs.String("issuer", "https://demo-issuer.ferrofed.local", "iss of the token")
	audience := fs.String("audience", "ferrofed-demo", "aud of the token")
	scope := fs.String("scope", "ferrofed.operator", "scope of the token")
	clientOut := fs.String("client-out", "", "where to write a data-plane client's token too (none when empty)")
	clientScope := fs.String("client-scope", "system/*.rs", "scope of the client's token: read and search every resource type")
	_ = fs.Parse(args)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "demo", Algorithm: string(jose.ES256), Use: "sig"}}}
	data, err := json.MarshalIndent(jwks, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "jwks.json"), data, 0o644); err != nil {
		return err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "demo"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return err
	}
	sign := func(subject, scope string) (string, error) {
		now := time.Now()
		return jwt.Signed(signer).Claims(jwt.Claims{
			Issuer:    *issuer,
			Subject:   subject,
			Audience:  jwt.Audience{*audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
			Expiry:    jwt.NewNumericDate(now.Add(24 * time.Hour)),
		}).Claims(map[string]any{"scope": scope}).Serialize()
	}
	if *clientOut != "" {
		client, err := sign("demo-app", *clientScope)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*clientOut, []byte(client+"\n"), 0o600); err != nil {
			return err
		}
	}
	tok, err := sign("demo-operator", *scope)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

// drainLog prints the drain steps of a gateway's JSON log, one line each.
func drainLog(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: demo drainlog FILE")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	steps := map[string]string{
		"ShutdownInitiated": "readiness answers 503 (phase draining); the listener still accepts",
		"DrainDelayElapsed": "step 1: drain delay over (server.drain_delay_ms)",
		"ListenerClosed":    "step 2: listener closed; each connection finishes its request",
		"InFlightDrained":   "step 3: in-flight requests done (server.shutdown_timeout_ms)",
		"BindingsStopped":   "step 4: bindings stopped (server.bindings_drain_timeout_ms)",
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := 0
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		msg, _ := line["msg"].(string)
		switch msg {
		case "Drain step finished":
			sig, _ := line["signal"].(string)
			extra := []string{}
			for _, k := range []string{"drainDelay", "shutdownTimeout", "bindingsDrainTimeout", "outcome", "cutConnections", "abandoned"} {
				if v, ok := line[k]; ok {
					extra = append(extra, fmt.Sprintf("%s=%v", k, v))
				}
			}
			fmt.Printf("  %-18s took %-12v %s  %s\n", sig, line["took"], steps[sig], strings.Join(extra, " "))
			found++
		case "Drained", "Stopped", "Draining":
			fmt.Printf("  %-18s %s\n", msg, compact(line))
		}
	}
	if found == 0 {
		return fmt.Errorf("no drain step in %s", args[0])
	}
	return sc.Err()
}

func compact(line map[string]any) string {
	var parts []string
	for _, k := range []string{"signal", "took", "outcome"} {
		if v, ok := line[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

// get sends one GET and prints the status line and up to 400 bytes of the body.
func get(args []string) error {
	if len(args) < 1 {
		return errors.New("usage: demo get URL [BEARER]")
	}
	req, err := http.NewRequest(http.MethodGet, args[0], nil)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		req.Header.Set("Authorization", "Bearer "+args[1])
	}
	c := &http.Client{Timeout: 15 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 400))
	fmt.Printf("%s  %s\n", res.Status, strings.TrimSpace(string(body)))
	return nil
}

// freePort prints a TCP port free on 127.0.0.1 at the time of the call.
func freePort() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	return nil
}
