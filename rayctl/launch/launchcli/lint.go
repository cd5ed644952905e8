package launchcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gridweave.dev/manifest/validation"
)

// lintFormats are lint's output formats.
var lintFormats = []string{"text", "json", "sarif", "junit", "github"}

// lintCommand is `launcher lint`: validate and lint files, with
// suppressions (comments and the config file), in the formats CI systems
// read. Exit status: 0 clean or warnings only (unless --fail-on warning),
// 1 errors, 2 usage or unreadable input.
func lintCommand(validator func() (*validation.Validator, error), stdin io.Reader, stdout io.Writer) *cobra.Command {
	var format, configPath, failOn string
	var listRules bool
	lint := &cobra.Command{
		Use:   "lint PATH... | -",
		Short: "Validate and lint Kubernetes YAML: files, directories (recursively), or - for stdin",
		Long: "Validate and lint Kubernetes YAML as the API server and the KubeRay operator judge it.\n\n" +
			"Silence one finding with a comment on its line, or at the top of a document for its object:\n" +
			"  # gridweave-lint: ignore=<rule-id> <reason>\n" +
			"and rules or paths with " + validation.ConfigFile + " (found from the current directory upward, or --config):\n" +
			"  rules: {fractional-cpu: off, exposed-dashboard: error}\n  exclude: [vendor, \"charts/*/templates\"]\n\n" +
			"Exit status: 0 clean or warnings only, 1 errors (or warnings with --fail-on warning), 2 usage or unreadable input.",
		Args: func(cmd *cobra.Command, args []string) error {
			if listRules {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.MinimumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(lintFormats, format) {
				return fmt.Errorf("-o %q: want one of %s", format, strings.Join(lintFormats, ", "))
			}
			if failOn != "error" && failOn != "warning" {
				return fmt.Errorf("--fail-on %q: want error or warning", failOn)
			}
			if listRules {
				return writeRules(stdout, format)
			}
			cfg, err := lintConfig(configPath)
			if err != nil {
				return err
			}
			v, err := validator()
			if err != nil {
				return err
			}
			files, err := listPaths(args)
			if err != nil {
				return err
			}
			files = slices.DeleteFunc(files, func(f string) bool {
				return f != "-" && (cfg.Excluded(f) || filepath.Base(f) == validation.ConfigFile)
			})
			var stdinCopy bytes.Buffer
			docs := &recordingDocuments{inner: &pathDocuments{paths: files, stdin: io.TeeReader(stdin, &stdinCopy)}, keep: format == "junit"}
			findings, objects, err := validation.LintReader(v, docs)
			if err != nil {
				return err
			}
			// The texts of the files linted, for their suppression comments
			// (and their own mistakes) and the findings' columns.
			sources := map[string][]byte{}
			for _, file := range files {
				if file == "-" {
					sources["stdin"] = stdinCopy.Bytes()
				} else if data, err := os.ReadFile(file); err == nil {
					sources[file] = data
				}
			}
			kept, suppressed := validation.Suppress(findings, sources, cfg)
			run := validation.Run{Objects: docs.objects, Findings: kept, Suppressed: suppressed, Sources: sources, ToolVersion: toolVersion()}
			if err := writeLint(stdout, format, run, objects); err != nil {
				return err
			}
			if validation.HasErrors(kept) || failOn == "warning" && len(kept) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	lint.Flags().StringVarP(&format, "output", "o", "text", strings.Join(lintFormats, ", ")+" (SARIF 2.1.0, JUnit XML, GitHub workflow annotations)")
	lint.Flags().StringVar(&configPath, "config", "", "the lint config file (default: "+validation.ConfigFile+" in the current directory or above)")
	lint.Flags().StringVar(&failOn, "fail-on", "error", "exit 1 on error, or on warning too")
	lint.Flags().BoolVar(&listRules, "list-rules", false, "print every rule: id, severity, help (-o json for JSON)")
	return lint
}

// lintConfig loads the config named, or the one found from the current
// directory upward; nil when there is none.
func lintConfig(path string) (*validation.Config, error) {
	if path == "" {
		found, err := validation.FindConfig(".")
		if err != nil || found == "" {
			return nil, err
		}
		path = found
	}
	return validation.LoadConfig(path)
}

func writeRules(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"rules": validation.Rules()})
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, r := range validation.Rules() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.ID, r.Severity, r.Help)
	}
	return tw.Flush()
}

func writeLint(w io.Writer, format string, run validation.Run, objects int) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		findings, suppressed := run.Findings, run.Suppressed
		if findings == nil {
			findings = []validation.Finding{}
		}
		if suppressed == nil {
			suppressed = []validation.Suppressed{}
		}
		return enc.Encode(map[string]any{"objects": objects, "findings": findings, "suppressed": suppressed})
	case "sarif":
		return validation.WriteSARIF(w, run)
	case "junit":
		return validation.WriteJUnit(w, run)
	case "github":
		if err := validation.WriteGitHub(w, run); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "%d objects, %s\n", objects, summary(run.Findings, len(run.Suppressed)))
		return err
	}
	for _, f := range run.Findings {
		fmt.Fprintln(w, f)
	}
	_, err := fmt.Fprintf(w, "%d objects, %s\n", objects, summary(run.Findings, len(run.Suppressed)))
	return err
}

// recordingDocuments notes each object read, for reports that list them.
type recordingDocuments struct {
	inner   validation.Documents
	keep    bool
	objects []validation.ObjectRef
}

func (r *recordingDocuments) Next() (validation.Document, error) {
	d, err := r.inner.Next()
	if err == nil && r.keep {
		r.objects = append(r.objects, validation.ObjectRef{Source: d.Source, Object: validation.DescribeDocument(d)})
	}
	return d, err
}

// toolVersion is the launcher's module version, when it was built as one.
func toolVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return ""
}
