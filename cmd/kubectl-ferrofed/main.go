// Command kubectl-ferrofed is the kubectl plugin of ferrofed (`kubectl ferrofed`): a
// Gateway's health at a glance from its status (status, drains, report) and, offline,
// what admission and the operator would make of a Gateway manifest (check). It reads
// what the operator wrote; it never reaches a pod and never holds a token
// (docs/operator.md, "kubectl ferrofed").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errRefused is check's answer to a manifest admission would refuse: exit code 1.
var errRefused = errors.New("refused")

// readTimeout bounds each read from the cluster.
const readTimeout = 30 * time.Second

// run is the plugin with args; it returns the exit code: 0, 1 for a refused manifest,
// 2 for any other error.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRoot(stdout)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errRefused):
		return 1
	}
	fmt.Fprintln(stderr, "Error:", err)
	return 2
}

func newRoot(stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-ferrofed",
		Short:         "The state of ferrofed Gateways, from what the operator reports",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	root.PersistentFlags().StringVar(&loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(overrides, root.PersistentFlags(), clientcmd.RecommendedConfigOverrideFlags(""))
	cluster := func() (client.Client, string, error) {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, "", err
		}
		ns, _, err := cc.Namespace()
		if err != nil {
			return nil, "", err
		}
		scheme, err := controllers.NewScheme()
		if err != nil {
			return nil, "", err
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		return c, ns, err
	}
	get := func(name string) (*ferrofedv1alpha1.Gateway, error) {
		c, ns, err := cluster()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		gw := &ferrofedv1alpha1.Gateway{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); err != nil {
			return nil, fmt.Errorf("read Gateway %s/%s: %w", ns, name, err)
		}
		return gw, nil
	}
	root.AddCommand(&cobra.Command{
		Use:   "status NAME",
		Short: "Conditions, replicas, grace period against recent drains, dependencies and audit backlog",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			gw, err := get(args[0])
			if err != nil {
				return err
			}
			return writeStatus(stdout, gw)
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "drains NAME",
		Short: "The Gateway's recent drains (status.drains), newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			gw, err := get(args[0])
			if err != nil {
				return err
			}
			return writeDrains(stdout, gw)
		},
	})
	var pod string
	report := &cobra.Command{
		Use:   "report NAME",
		Short: "The dependency report across the replicas, or one pod's (--pod), as the operator read them",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			gw, err := get(args[0])
			if err != nil {
				return err
			}
			return writeReport(stdout, gw, pod)
		},
	}
	report.Flags().StringVar(&pod, "pod", "", "one pod's report instead of the aggregate")
	root.AddCommand(report)
	var file string
	check := &cobra.Command{
		Use:   "check -f FILE",
		Short: "Offline: the admission rules and what the operator would derive (grace period, probes); exit 1 on a refusal",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			data, err := readManifest(file)
			if err != nil {
				return err
			}
			return writeCheck(stdout, data)
		},
	}
	check.Flags().StringVarP(&file, "filename", "f", "", "the Gateway manifest (YAML or JSON; - for standard input)")
	_ = check.MarkFlagRequired("filename")
	root.AddCommand(check)
	return root
}

// maxManifestBytes bounds what check reads.
const maxManifestBytes = 1 << 20

func readManifest(file string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("%s is over %d bytes", file, maxManifestBytes)
	}
	return data, nil
}
