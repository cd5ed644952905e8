package launchcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
)

// exitError carries an exit status through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitStatus is the status the command asks to exit with.
func (e exitError) ExitStatus() int { return e.code }

// Run runs the launcher with args (without the program's name) and
// returns its exit status: 0 fine (warnings allowed), 1 an error was
// found (or a doctor check failed), 2 the command could not run, 130
// interrupted while waiting. It sets the collector's pace for the
// command first (see package gcpace).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := New(stdin, stdout, stderr)
	paceFor(root, args)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "launcher:", err)
		return 2
	}
}

// New is the launcher's command tree, reading stdin and writing stdout
// and stderr, for a program that embeds its commands in its own; an
// exit status other than 0 and 2 comes back as an error whose
// ExitStatus method gives it.
func New(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "launcher",
		Short:         "Render, validate and lint Ray-on-Kubernetes launches",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	var namespace string
	root.PersistentFlags().StringVarP(&namespace, "namespace", "n", "", "override the infra spec's namespace")
	kubernetesVersion := validation.DefaultKubernetesVersion.String()
	validator := func() (*validation.Validator, error) {
		target, err := validation.ParseKubernetesVersion(kubernetesVersion)
		if err != nil {
			return nil, fmt.Errorf("--kubernetes-version: %w", err)
		}
		return validation.NewValidator(validation.TargetKubernetes(target)), nil
	}

	load := func(recipePath, infraPath string) (*manifest.Recipe, *manifest.Infra, []*unstructured.Unstructured, error) {
		r, err := manifest.LoadRecipe(recipePath)
		if err != nil {
			return nil, nil, nil, err
		}
		in, err := manifest.LoadInfra(infraPath)
		if err != nil {
			return nil, nil, nil, err
		}
		if namespace != "" {
			in.Namespace = namespace
		}
		objs, err := manifest.Render(r, in)
		return r, in, objs, err
	}

	check := &cobra.Command{
		Use:   "check RECIPE INFRA",
		Short: "Validate and lint a recipe and infra spec; show what Ray will see per group",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := validator()
			if err != nil {
				return err
			}
			_, _, objs, err := load(args[0], args[1])
			if err != nil {
				fmt.Fprintln(stderr, err)
				return exitError{1}
			}
			docs := make([]validation.Document, len(objs))
			for i, o := range objs {
				docs[i] = validation.Document{Source: "render#" + fmt.Sprint(i+1), Object: o}
			}
			findings := validation.Lint(v, docs)
			for _, f := range findings {
				fmt.Fprintln(stdout, f)
			}
			for _, o := range objs {
				name, spec := raySpec(o)
				if spec == nil {
					continue
				}
				rs, err := validation.ComputeStartResources(name, spec)
				if err != nil {
					fmt.Fprintf(stdout, "%s %s: %v\n", o.GetKind(), o.GetName(), err)
					continue
				}
				fmt.Fprintf(stdout, "Ray resources per node of %s %s (KubeRay %s):\n", o.GetKind(), o.GetName(), validation.KubeRayVersion)
				for _, r := range rs {
					fmt.Fprintln(stdout, "  "+r.String())
				}
			}
			if validation.HasErrors(findings) {
				return exitError{1}
			}
			fmt.Fprintf(stdout, "%d objects, %s\n", len(objs), summary(findings, -1))
			return nil
		},
	}

	var outDir string
	render := &cobra.Command{
		Use:   "render RECIPE INFRA",
		Short: "Print the manifests in apply order, or write one file per object with -o DIR",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, objs, err := load(args[0], args[1])
			if err != nil {
				fmt.Fprintln(stderr, err)
				return exitError{1}
			}
			if outDir == "" {
				data, err := manifest.Marshal(objs)
				if err != nil {
					return err
				}
				_, err = stdout.Write(data)
				return err
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			for i, o := range objs {
				data, err := manifest.Marshal([]*unstructured.Unstructured{o})
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(outDir, manifest.FileName(i, o)), data, 0o644); err != nil {
					return err
				}
			}
			fmt.Fprintf(stderr, "wrote %d files to %s\n", len(objs), outDir)
			return nil
		},
	}
	render.Flags().StringVarP(&outDir, "output-dir", "o", "", "write one file per object into this directory")

	lint := lintCommand(validator, stdin, stdout)
	for _, c := range []*cobra.Command{check, lint} {
		c.Flags().StringVar(&kubernetesVersion, "kubernetes-version", kubernetesVersion,
			"the Kubernetes release to judge API versions by: removed ones are errors, deprecated ones warnings")
	}

	chart := &cobra.Command{Use: "chart", Short: "The RayService chart"}
	release := "release-name"
	chartRender := &cobra.Command{
		Use:   "render VALUES",
		Short: "Print the RayService chart's objects for a values file",
		Long: "Print the RayService chart's objects for a values file, as `helm template RELEASE deploy/helm/rayservice\n" +
			"-n NAMESPACE -f VALUES` does: the values' name and namespace default to the release's (--release, -n).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := manifest.LoadChartValues(args[0])
			if err != nil {
				fmt.Fprintln(stderr, err)
				return exitError{1}
			}
			objs, err := manifest.RenderChart(values, manifest.ChartRelease{Name: release, Namespace: namespace})
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
				return exitError{1}
			}
			data, err := manifest.Marshal(objs)
			if err != nil {
				return err
			}
			_, err = stdout.Write(data)
			return err
		},
	}
	chartRender.Flags().StringVar(&release, "release", release, "the release's name, the default of the values' name (helm template's default)")
	chart.AddCommand(chartRender)
	schema := &cobra.Command{
		Use:   "schema " + strings.Join(manifest.SchemaKinds, "|"),
		Short: "Print the JSON Schema of a recipe, an infra spec or the chart's values, for editors and CI",
		Long: "Print the JSON Schema of the launcher's own files (draft 2020-12; the chart's values draft-07, as Helm 3\n" +
			"enforces), made from the Go types the strict parser\n" +
			"decodes into. For the YAML language server, save it and start a file with\n" +
			"  # yaml-language-server: $schema=./recipe.schema.json",
		Args:      cobra.ExactArgs(1),
		ValidArgs: manifest.SchemaKinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := manifest.Schema(args[0])
			if err != nil {
				return err
			}
			_, err = stdout.Write(append(data, '\n'))
			return err
		},
	}
	root.AddCommand(check, render, lint, chart, schema, lspCommand(validator, stdin, stdout))
	addLiveCommands(root, &namespace, stdout, stderr)
	return root
}

// summary counts findings by severity, and the suppressed ones when
// suppressed is not negative.
func summary(fs []validation.Finding, suppressed int) string {
	errs, warns := 0, 0
	for _, f := range fs {
		if f.Severity == validation.SeverityError {
			errs++
		} else {
			warns++
		}
	}
	if suppressed >= 0 {
		return fmt.Sprintf("%d errors, %d warnings, %d suppressed", errs, warns, suppressed)
	}
	return fmt.Sprintf("%d errors, %d warnings", errs, warns)
}

// raySpec returns the cluster spec inside a RayCluster or RayJob (decoded
// through JSON: the unstructured converter's field cache is slow to fill
// in a short-lived process).
func raySpec(o *unstructured.Unstructured) (string, *rayv1.RayClusterSpec) {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return "", nil
	}
	switch o.GetKind() {
	case "RayCluster":
		rc := &rayv1.RayCluster{}
		if json.Unmarshal(data, rc) == nil {
			return rc.Name, &rc.Spec
		}
	case "RayJob":
		j := &rayv1.RayJob{}
		if json.Unmarshal(data, j) == nil && j.Spec.RayClusterSpec != nil {
			return j.Name, j.Spec.RayClusterSpec
		}
	}
	return "", nil
}

// listPaths lists the YAML and JSON files under the given paths
// (directories recursively, in a stable order; - is stdin).
func listPaths(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		if p == "-" {
			files = append(files, p)
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := strings.ToLower(filepath.Ext(path))
			if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// pathDocuments reads the documents of files one after another, each
// file opened when its turn comes (- is stdin).
type pathDocuments struct {
	paths  []string
	stdin  io.Reader
	file   *os.File
	reader *validation.DocumentReader
	read   inputBytes
}

func (p *pathDocuments) Next() (validation.Document, error) {
	for {
		if p.reader != nil {
			d, err := p.reader.Next()
			if err != io.EOF {
				return d, err
			}
			p.reader = nil
			if p.file != nil {
				p.file.Close()
				p.file = nil
			}
		}
		if len(p.paths) == 0 {
			return validation.Document{}, io.EOF
		}
		path := p.paths[0]
		p.paths = p.paths[1:]
		if path == "-" {
			p.reader = validation.NewDocumentReader("stdin", p.read.counting(p.stdin))
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return validation.Document{}, err
		}
		p.file, p.reader = f, validation.NewDocumentReader(path, p.read.counting(f))
	}
}
