use clap::Parser as _;

use super::*;

fn serve(args: &[&str]) -> ContinuousAuditArgs {
    let cli = crate::cli::Cli::try_parse_from([&["pod-director", "serve"], args].concat()).expect("parses");
    let crate::cli::Command::Serve(serve) = cli.command else {
        panic!("serve expected");
    };
    serve.audit
}

#[test]
fn the_continuous_audit_runs_every_ten_minutes_unless_told_otherwise() {
    let defaults = serve(&[]);
    assert_eq!(defaults.audit_interval, std::time::Duration::from_secs(600));
    assert_eq!(defaults.audit_lease, "pod-director-audit");
    let off = serve(&["--audit-interval", "0"]);
    assert!(off.audit_interval.is_zero());
    assert!(crate::cli::Cli::try_parse_from(["pod-director", "serve", "--audit-interval", "often"]).is_err());
    assert!(!defaults.reports, "reports are off until turned on");
    assert_eq!(
        (defaults.reports_name.as_str(), defaults.reports_max_results),
        ("pod-director", 100)
    );
    assert!(serve(&["--reports", "true"]).reports);
    assert!(!defaults.audit_events, "Events are off until turned on");
}

#[test]
fn serve_flags_have_the_documented_defaults() {
    let cli = crate::cli::Cli::try_parse_from(["pod-director", "serve"]).expect("defaults parse");
    let crate::cli::Command::Serve(args) = cli.command else {
        panic!("serve expected");
    };
    let settings = Settings::from_args(&args);
    assert_eq!(settings.addr.to_string(), "0.0.0.0:8443");
    assert_eq!(settings.probe_addr.to_string(), "0.0.0.0:8080");
    assert_eq!(
        settings.tls,
        Some(TlsFiles {
            cert: "/etc/pod-director/tls/tls.crt".into(),
            key: "/etc/pod-director/tls/tls.key".into(),
        })
    );
    let cli = crate::cli::Cli::try_parse_from(["pod-director", "serve", "--insecure-http", "--namespace", "pd"])
        .expect("parses");
    let crate::cli::Command::Serve(args) = cli.command else {
        panic!("serve expected");
    };
    let settings = Settings::from_args(&args);
    assert_eq!(settings.tls, None);
    assert_eq!(settings.own_namespace.as_deref(), Some("pd"));
}

#[test]
fn serve_flags_name_the_configurations_to_reconcile() {
    let parse = |args: &[&str]| {
        let cli = crate::cli::Cli::try_parse_from([&["pod-director", "serve"], args].concat()).expect("parses");
        let crate::cli::Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        args.webhooks
    };
    let off = parse(&[]);
    assert!(off.targets().is_empty());
    assert_eq!(
        off.entries.settings(),
        EntrySettings::default(),
        "the flags' defaults are Default's"
    );
    assert_eq!(off.webhook_resync_interval, std::time::Duration::from_secs(60));
    let on = parse(&[
        "--mutating-webhook-configuration",
        "pd",
        "--validating-webhook-configuration=pd",
        "--webhook-resync-interval=5s",
    ]);
    assert_eq!(
        on.targets(),
        [(Kind::Mutating, "pd".to_owned()), (Kind::Validating, "pd".to_owned())]
    );
    assert_eq!(on.webhook_resync_interval, std::time::Duration::from_secs(5));
}
