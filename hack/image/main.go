// Command image builds a single-layer OCI image tarball from files on disk, so the
// local cluster (hack/local-cluster.sh) can run the project's own binaries without a
// registry: the tarball is imported with `ctr -n k8s.io images import`.
//
// It lives in its own module so go-containerregistry's dependencies never meet the
// Kubernetes ones in the project's go.mod.
//
//	image -tag ferrofed.local/ferrofed:e2e -o ferrofed.tar \
//	      -file /ferrofed=bin/ferrofed -entrypoint /ferrofed -user 65532
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list collects a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var files, envs, dirs list
	tag := flag.String("tag", "", "image reference to record in the tarball (required), e.g. ferrofed.local/ferrofed:e2e")
	out := flag.String("o", "", "output tarball (required)")
	entrypoint := flag.String("entrypoint", "", "entrypoint, space-separated (required)")
	user := flag.String("user", "", "numeric user[:group] the image runs as (empty: root)")
	workdir := flag.String("workdir", "/", "working directory")
	flag.Var(&files, "file", "IMAGEPATH=HOSTPATH, repeatable; mode is kept")
	flag.Var(&dirs, "dir", "an empty directory in the image, mode 1777 (e.g. /tmp), repeatable")
	flag.Var(&envs, "env", "KEY=VALUE, repeatable")
	flag.Parse()
	if *tag == "" || *out == "" || *entrypoint == "" || len(files) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(*tag, *out, *entrypoint, *user, *workdir, files, dirs, envs); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(tag, out, entrypoint, user, workdir string, files, dirs, envs []string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("parse -tag %q: %w", tag, err)
	}
	layerTar, err := layerTarball(files, dirs)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cfg = cfg.DeepCopy()
	// containerd imports only the platform it runs on; an empty platform is skipped.
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = strings.Fields(entrypoint)
	cfg.Config.User = user
	cfg.Config.WorkingDir = workdir
	cfg.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, envs...)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	digest, _ := img.Digest()
	fmt.Printf("image: wrote %s (%s, %s)\n", out, ref.Name(), digest)
	return nil
}

// layerTarball writes the files and directories into one uncompressed tar, parents
// first, with fixed timestamps so identical inputs give identical layers.
func layerTarball(files, dirs []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	seen := map[string]bool{}
	mkdirs := func(p string, mode int64) error {
		var parents []string
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			parents = append(parents, d)
		}
		sort.Strings(parents)
		for _, d := range parents {
			if seen[d] {
				continue
			}
			seen[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: epoch}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range dirs {
		d = path.Clean("/" + d)
		if err := mkdirs(d+"/x", 0o755); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o1777, ModTime: epoch}); err != nil {
			return nil, err
		}
		seen[d] = true
	}
	for _, f := range files {
		imgPath, hostPath, ok := strings.Cut(f, "=")
		if !ok || imgPath == "" || hostPath == "" {
			return nil, fmt.Errorf("-file %q: want IMAGEPATH=HOSTPATH", f)
		}
		imgPath = path.Clean("/" + imgPath)
		data, err := os.ReadFile(hostPath)
		if err != nil {
			return nil, fmt.Errorf("-file %s: %w", imgPath, err)
		}
		st, err := os.Stat(hostPath)
		if err != nil {
			return nil, err
		}
		if err := mkdirs(imgPath, 0o755); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(imgPath, "/"), Mode: int64(st.Mode().Perm()), Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
