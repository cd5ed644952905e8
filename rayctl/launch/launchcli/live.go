package launchcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"gridweave.dev/manifest"
	"gridweave.dev/rayctl/dashboard"
	"gridweave.dev/rayctl/launch"
)

// kubeFlags are kubectl's connection flags.
type kubeFlags struct {
	kubeconfig, context string
	namespace           *string
}

// session connects with the flags; it also returns the namespace to use
// when the command names none (-n, else the context's, else "default").
func (k *kubeFlags) session(out io.Writer) (*launch.Session, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns := *k.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	s, err := launch.NewSession(cfg, out)
	if err != nil {
		return nil, "", err
	}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		s.Terminal = true
	}
	return s, ns, nil
}

func addLiveCommands(root *cobra.Command, namespace *string, stdout, stderr io.Writer) {
	k := &kubeFlags{namespace: namespace}
	root.PersistentFlags().StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default $KUBECONFIG or ~/.kube/config)")
	root.PersistentFlags().StringVar(&k.context, "context", "", "the kubeconfig context to use")

	// completeLaunches completes the names of RayClusters and RayJobs.
	completeLaunches := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, ns, err := k.session(io.Discard)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		if rcs, err := s.Ray.RayV1().RayClusters(ns).List(cmd.Context(), metav1.ListOptions{}); err == nil {
			for _, rc := range rcs.Items {
				names = append(names, rc.Name)
			}
		}
		if jobs, err := s.Ray.RayV1().RayJobs(ns).List(cmd.Context(), metav1.ListOptions{}); err == nil {
			for _, j := range jobs.Items {
				names = append(names, j.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}

	var runOpts launch.RunOptions
	runLaunch := func(cmd *cobra.Command, recipe, infra, forceMode string) error {
		s, _, err := k.session(stdout)
		if err != nil {
			return err
		}
		p, err := s.Prepare(recipe, infra, launch.PrepareOptions{Namespace: *namespace})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
		if forceMode != "" && p.Infra.Launch.Mode != forceMode {
			fmt.Fprintf(stderr, "%s: launch.mode is %q; cluster up brings up a bare RayCluster (launch.mode: bringup)\n", infra, p.Infra.Launch.Mode)
			return exitError{1}
		}
		_, err = s.Run(cmd.Context(), p, runOpts)
		switch {
		case errors.Is(err, launch.ErrLint):
			fmt.Fprintln(stderr, "launcher: lint found errors; nothing was applied")
			return exitError{1}
		case errors.Is(err, launch.ErrInterrupted):
			return exitError{130}
		case err != nil:
			fmt.Fprintln(stderr, "launcher:", err)
			return exitError{1}
		}
		return nil
	}
	addRunFlags := func(c *cobra.Command) {
		c.Flags().DurationVar(&runOpts.Timeout, "timeout", 15*time.Minute, "how long to wait for the launch to run")
		c.Flags().BoolVar(&runOpts.NoWait, "no-wait", false, "return once everything is applied")
		c.Flags().StringVar(&runOpts.DashboardURL, "dashboard-url", "", "the Ray dashboard (attach mode; default through the API server's service proxy)")
	}
	runCmd := &cobra.Command{
		Use:   "run RECIPE INFRA",
		Short: "Apply the launch (server-side apply) and start it per launch.mode; wait until it runs",
		Args:  cobra.ExactArgs(2),
		RunE:  func(cmd *cobra.Command, args []string) error { return runLaunch(cmd, args[0], args[1], "") },
	}
	addRunFlags(runCmd)

	cluster := &cobra.Command{Use: "cluster", Short: "The long-lived RayCluster with its sandbox"}
	up := &cobra.Command{
		Use:   "up RECIPE INFRA",
		Short: "Bring up the bare RayCluster, its sandbox, NetworkPolicy and PDBs (launch.mode: bringup)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLaunch(cmd, args[0], args[1], manifest.ModeBringup)
		},
	}
	addRunFlags(up)
	var downTimeout time.Duration
	down := &cobra.Command{
		Use:               "down NAME",
		Short:             "Delete what up or run applied for NAME (by its labels) and wait until it is gone",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeLaunches,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := k.session(stdout)
			if err != nil {
				return err
			}
			if _, err := s.Down(cmd.Context(), ns, args[0], downTimeout); err != nil {
				if cmd.Context().Err() != nil {
					fmt.Fprintln(stderr, "launcher: interrupted; what was deleted goes on going; run cluster down again to wait for it")
					return exitError{130}
				}
				fmt.Fprintln(stderr, "launcher:", err)
				return exitError{1}
			}
			return nil
		},
	}
	down.Flags().DurationVar(&downTimeout, "timeout", 5*time.Minute, "how long to wait until everything is gone")

	var output string
	status := &cobra.Command{
		Use:               "status NAME",
		Short:             "Pods per fleet with phase, node and scheduling reason; the RayJob's state; the dashboard",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeLaunches,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := k.session(stdout)
			if err != nil {
				return err
			}
			st, err := s.Status(cmd.Context(), ns, args[0])
			if err != nil {
				fmt.Fprintln(stderr, "launcher:", err)
				return exitError{1}
			}
			return printStatus(stdout, st, output)
		},
	}
	status.Flags().StringVarP(&output, "output", "o", "", "yaml, json or wide")
	clusterStatus := &cobra.Command{Use: "status NAME", Short: status.Short, Args: cobra.ExactArgs(1), ValidArgsFunction: completeLaunches, RunE: status.RunE}
	clusterStatus.Flags().StringVarP(&output, "output", "o", "", "yaml, json or wide")
	cluster.AddCommand(up, down, clusterStatus)

	var logOpts launch.LogOptions
	var tail int64
	logs := &cobra.Command{
		Use:               "logs NAME [head|submitter|sandbox|GROUP]",
		Short:             "Logs of the launch's pods, each line prefixed with its pod",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeLaunches,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := k.session(stdout)
			if err != nil {
				return err
			}
			if len(args) == 2 {
				logOpts.Target = args[1]
			}
			if cmd.Flags().Changed("tail") {
				if tail < 0 {
					return fmt.Errorf("--tail %d: want a number of lines, 0 or more", tail)
				}
				logOpts.Tail = &tail
			}
			if err := s.Logs(cmd.Context(), ns, args[0], logOpts, stdout); err != nil && cmd.Context().Err() == nil {
				fmt.Fprintln(stderr, "launcher:", err)
				return exitError{1}
			}
			return nil
		},
	}
	logs.Flags().BoolVarP(&logOpts.Follow, "follow", "f", false, "keep streaming")
	logs.Flags().Int64Var(&tail, "tail", -1, "only the last N lines of each pod")
	logs.Flags().DurationVar(&logOpts.Since, "since", 0, "only lines newer than this (e.g. 10m)")
	logs.Flags().BoolVarP(&logOpts.Previous, "previous", "p", false, "the previous container's log (after a crash)")

	var devOpts launch.DevOptions
	dev := &cobra.Command{
		Use:   "dev RECIPE INFRA",
		Short: "Bring the cluster up once (bringup), then send the local code (only what changed) and submit the entrypoint",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := k.session(stdout)
			if err != nil {
				return err
			}
			p, err := s.Prepare(args[0], args[1], launch.PrepareOptions{Namespace: *namespace, Mode: manifest.ModeBringup})
			if err != nil {
				fmt.Fprintln(stderr, err)
				return exitError{1}
			}
			_, err = s.Dev(cmd.Context(), p, devOpts)
			switch {
			case err != nil && cmd.Context().Err() != nil:
				return exitError{130}
			case errors.Is(err, launch.ErrLint):
				fmt.Fprintln(stderr, "launcher: lint found errors; nothing was applied")
				return exitError{1}
			case errors.Is(err, launch.ErrInterrupted):
				return exitError{130}
			case err != nil:
				fmt.Fprintln(stderr, "launcher:", err)
				return exitError{1}
			}
			return nil
		},
	}
	dev.Flags().StringVar(&devOpts.Dir, "dir", ".", "the local code to send")
	dev.Flags().StringVar(&devOpts.DashboardURL, "dashboard-url", "", "the Ray dashboard (default through the API server's service proxy)")
	dev.Flags().DurationVar(&devOpts.Timeout, "timeout", 15*time.Minute, "how long bringing the cluster up may take")

	root.AddCommand(runCmd, cluster, status, logs, dev, jobCommands(k, stdout, stderr, completeLaunches), doctorCommand(k, namespace, stdout, stderr))
}

func printStatus(w io.Writer, st *launch.Status, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	case "yaml":
		raw, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	case "", "wide":
	default:
		return fmt.Errorf("-o %q: want yaml, json or wide", output)
	}
	fmt.Fprintf(w, "launch %s/%s\n", st.Namespace, st.Name)
	if st.Cluster != "" {
		fmt.Fprintf(w, "RayCluster: %s\n", st.Cluster)
	}
	if j := st.Job; j != nil {
		fmt.Fprintf(w, "RayJob: deployment %s, job %s", dash(j.DeploymentStatus), dash(j.JobStatus))
		if j.JobID != "" {
			fmt.Fprintf(w, " (%s)", j.JobID)
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	header := "FLEET\tPOD\tPHASE\tNODE\tREASON"
	fmt.Fprintln(tw, header)
	for _, f := range st.Fleets {
		for _, p := range f.Pods {
			reason := p.Reason
			if output != "wide" && len(reason) > 80 {
				reason = reason[:80] + "…"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Fleet, p.Name, p.Phase, dash(p.Node), reason)
		}
	}
	tw.Flush()
	var counts []string
	for _, f := range st.Fleets {
		counts = append(counts, fmt.Sprintf("%s %d/%d running", f.Fleet, f.Running, len(f.Pods)))
	}
	fmt.Fprintln(w, strings.Join(counts, ", "))
	if st.Dashboard != "" {
		fmt.Fprintf(w, "dashboard: %s\n", st.Dashboard)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func jobCommands(k *kubeFlags, stdout, stderr io.Writer, completeLaunches func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) *cobra.Command {
	var clusterName, dashboardURL, output string
	job := &cobra.Command{Use: "job", Short: "Jobs of a cluster's Ray dashboard (through the API server's service proxy, or --dashboard-url)"}
	job.PersistentFlags().StringVar(&clusterName, "cluster", "", "the RayCluster (or RayJob) whose dashboard to use")
	job.PersistentFlags().StringVar(&dashboardURL, "dashboard-url", "", "the dashboard's URL, instead of the service proxy")
	_ = job.RegisterFlagCompletionFunc("cluster", completeLaunches)
	// session: the launch session, its namespace and the dashboard's
	// client.
	session := func(cmd *cobra.Command) (*launch.Session, string, *dashboard.Client, error) {
		if clusterName == "" && dashboardURL == "" {
			return nil, "", nil, errors.New("--cluster NAME or --dashboard-url URL is required")
		}
		s, ns, err := k.session(stdout)
		if err != nil {
			return nil, "", nil, err
		}
		d, err := s.Dashboard(cmd.Context(), ns, clusterName, dashboardURL)
		if err != nil {
			return nil, "", nil, err
		}
		return s, ns, d, nil
	}
	connect := func(cmd *cobra.Command) (*dashboard.Client, error) {
		_, _, d, err := session(cmd)
		return d, err
	}
	fail := func(err error) error {
		fmt.Fprintln(stderr, "launcher:", err)
		return exitError{1}
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "The dashboard's jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := connect(cmd)
			if err != nil {
				return fail(err)
			}
			if output != "" && output != "json" {
				return fmt.Errorf("-o %q: want json, or nothing for a table", output)
			}
			jobs, err := d.ListJobs(cmd.Context())
			if err != nil {
				return fail(err)
			}
			if output == "json" {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(jobs)
			}
			tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SUBMISSION ID\tSTATUS\tENTRYPOINT")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", dash(ptr.Deref(j.SubmissionID, "")), j.Status, j.Entrypoint)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "", "json")
	jobLogs := &cobra.Command{
		Use:   "logs [SUBMISSION_ID]",
		Short: "A job's driver log (without an id, the job of the RayJob --cluster names)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && clusterName == "" {
				return fail(errors.New("give a SUBMISSION_ID, or --cluster NAME of a RayJob to read its job's log"))
			}
			s, namespace, d, err := session(cmd)
			if err != nil {
				return fail(err)
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			} else {
				job, err := s.Ray.RayV1().RayJobs(namespace).Get(cmd.Context(), clusterName, metav1.GetOptions{})
				switch {
				case err != nil:
					return fail(fmt.Errorf("no SUBMISSION_ID given, and no RayJob %s/%s to take it from: %w", namespace, clusterName, err))
				case job.Status.JobId == "":
					return fail(fmt.Errorf("RayJob %s/%s has no job yet (deployment %q): try again once it runs", namespace, clusterName, job.Status.JobDeploymentStatus))
				}
				id = job.Status.JobId
			}
			logs, err := d.JobLogs(cmd.Context(), id)
			if err != nil {
				return fail(err)
			}
			_, err = io.WriteString(stdout, logs)
			return err
		},
	}
	stop := &cobra.Command{
		Use:   "stop SUBMISSION_ID",
		Short: "Stop a running job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := connect(cmd)
			if err != nil {
				return fail(err)
			}
			stopped, err := d.StopJob(cmd.Context(), args[0])
			if err != nil {
				return fail(err)
			}
			if stopped {
				fmt.Fprintf(stdout, "job %s stopping\n", args[0])
			} else {
				fmt.Fprintf(stdout, "job %s was not running\n", args[0])
			}
			return nil
		},
	}
	var submit launch.SubmitOptions
	var runtimeEnvFile, runtimeEnvJSON string
	var envVars []string
	var noWait bool
	submitCmd := &cobra.Command{
		Use:   "submit [flags] -- ENTRYPOINT...",
		Short: "Send local code (only what changed) and submit a job, then follow its log until it ends",
		Long: "Submit a job to the cluster's Ray dashboard, as `ray job submit` does: --working-dir is sent as the job's\n" +
			"working_dir (its local Python packages as py_modules; what the cluster already holds is not sent again),\n" +
			"--runtime-env (a YAML or JSON file), --runtime-env-json and --env make its runtime env. The log follows\n" +
			"until the job ends: exit 0 when it SUCCEEDED, 1 when it FAILED or was STOPPED (--no-wait: print its id).",
		Example: "  launcher job submit --cluster grpo-swe -n ml --working-dir . --env EPOCHS=3 -- python train.py",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env := map[string]any{}
			if runtimeEnvFile != "" {
				raw, err := os.ReadFile(runtimeEnvFile)
				if err != nil {
					return fail(err)
				}
				if err := yaml.Unmarshal(raw, &env); err != nil {
					return fail(fmt.Errorf("--runtime-env %s: %w", runtimeEnvFile, err))
				}
			}
			if env == nil {
				return fail(fmt.Errorf("--runtime-env %s: not a mapping", runtimeEnvFile))
			}
			if runtimeEnvJSON != "" {
				if err := json.Unmarshal([]byte(runtimeEnvJSON), &env); err != nil || env == nil {
					return fail(fmt.Errorf("--runtime-env-json: want a JSON object (%v)", err))
				}
			}
			if len(envVars) > 0 {
				vars, _ := env["env_vars"].(map[string]any)
				if vars == nil {
					vars = map[string]any{}
				}
				for _, kv := range envVars {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return fail(fmt.Errorf("--env %q: want NAME=VALUE", kv))
					}
					vars[k] = v
				}
				env["env_vars"] = vars
			}
			s, _, d, err := session(cmd)
			if err != nil {
				return fail(err)
			}
			opts := submit
			opts.Entrypoint, opts.RuntimeEnv = shellCommand(args), env
			res, err := s.SubmitJob(cmd.Context(), d, opts)
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(stdout, "submitted job %s\n", res.SubmissionID)
			if noWait {
				return nil
			}
			job, err := launch.FollowJob(cmd.Context(), d, res.SubmissionID, stdout, 0)
			switch {
			case err != nil && cmd.Context().Err() != nil:
				fmt.Fprintf(stderr, "launcher: interrupted: job %s keeps running; stop it with: launcher job stop %s\n", res.SubmissionID, res.SubmissionID)
				return exitError{130}
			case err != nil:
				fmt.Fprintf(stderr, "launcher: %v\nlauncher: job %s keeps running; follow it with: launcher job logs %s, stop it with: launcher job stop %s\n",
					err, res.SubmissionID, res.SubmissionID, res.SubmissionID)
				return exitError{1}
			case job.Status != "SUCCEEDED":
				return fail(fmt.Errorf("job %s %s: %s", res.SubmissionID, job.Status, ptr.Deref(job.Message, "")))
			}
			fmt.Fprintf(stdout, "job %s SUCCEEDED\n", res.SubmissionID)
			return nil
		},
	}
	submitCmd.Flags().StringVar(&submit.Dir, "working-dir", "", "local code to send as the job's working_dir")
	submitCmd.Flags().StringVar(&runtimeEnvFile, "runtime-env", "", "the job's runtime env, a YAML or JSON file")
	submitCmd.Flags().StringVar(&runtimeEnvJSON, "runtime-env-json", "", "the job's runtime env as JSON (over --runtime-env)")
	submitCmd.Flags().StringArrayVar(&envVars, "env", nil, "NAME=VALUE in the job's env_vars (repeatable; over the runtime env's)")
	submitCmd.Flags().StringVar(&submit.SubmissionID, "submission-id", "", "the job's id (default Ray's raysubmit_…)")
	submitCmd.Flags().Float64Var(&submit.EntrypointNumCPUs, "entrypoint-num-cpus", 0, "CPUs reserved for the driver")
	submitCmd.Flags().Float64Var(&submit.EntrypointNumGPUs, "entrypoint-num-gpus", 0, "GPUs reserved for the driver")
	submitCmd.Flags().BoolVar(&noWait, "no-wait", false, "print the job's id and return, without following it")
	job.AddCommand(submitCmd, list, jobLogs, stop)
	return job
}

func doctorCommand(k *kubeFlags, namespace *string, stdout, stderr io.Writer) *cobra.Command {
	var opts launch.DoctorOptions
	var output string
	doctor := &cobra.Command{
		Use:   "doctor RECIPE INFRA",
		Short: "Check what the launch needs from the cluster; every failure says how to fix it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("-o %q: want json, or nothing for text", output)
			}
			s, _, err := k.session(stdout)
			if err != nil {
				return err
			}
			p, err := s.Prepare(args[0], args[1], launch.PrepareOptions{Namespace: *namespace})
			if err != nil {
				fmt.Fprintln(stderr, err)
				return exitError{1}
			}
			checks := s.Doctor(cmd.Context(), p, opts)
			if output == "json" {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(checks); err != nil {
					return err
				}
			} else {
				for _, c := range checks {
					fmt.Fprintln(stdout, c)
				}
			}
			if launch.Failed(checks) {
				return exitError{1}
			}
			return nil
		},
	}
	doctor.Flags().DurationVar(&opts.ProbeTimeout, "probe-timeout", 20*time.Second, "how long the operator may take to answer the probe RayCluster")
	doctor.Flags().BoolVar(&opts.NoProbe, "no-probe", false, "skip the operator probe (it creates and deletes a RayCluster that never schedules)")
	doctor.Flags().StringVarP(&output, "output", "o", "", "json")
	return doctor
}

// shellCommand joins a command's words into one shell command line, each
// word quoted for sh when it needs it (ray job submit's entrypoint runs
// in a shell), so that -- python -c "import sys; sys.exit(3)" runs what
// it says.
func shellCommand(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.IndexFunc(w, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:,@%+", r))
		}) < 0 {
			quoted[i] = w
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'"
	}
	return strings.Join(quoted, " ")
}
