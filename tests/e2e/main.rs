//! The end-to-end tests of `session-prune`, in one test binary: one module per behaviour,
//! named after it, each running the real binary, a real SQLite file on disk, the server's
//! router in this process, a real server on loopback or the real OpenCode, as its subject
//! needs. `common` holds the shared fixtures and clients, `opencode_real` the harness that runs OpenCode releases against a mock model.

mod common;
#[path = "support/opencode_real.rs"]
mod opencode_real;

mod abandoned_runs_fail_closed_on_odd_times_and_tables;
mod abandoned_runs_see_every_write_of_their_session;
mod abandoned_runs_unblock_their_sessions;
mod clean_interrupted_then_finished_by_a_rerun;
mod clean_keeps_its_promises_on_damaged_databases;
mod clean_on_a_full_disk_counts_what_committed;
mod clean_prunes_completed_messages_and_keeps_text;
mod clean_prunes_what_it_planned_unless_opencode_wrote_since;
mod cli_commands_and_exit_codes;
mod cli_history_and_prune_batch;
mod cli_reports_the_journal_busy_while_serving;
mod contract_bounds_are_enforced_before_journaling;
mod damaged_rows_never_stop_a_scan_or_a_prune;
mod duration_flags_take_the_same_forms;
mod events_keep_their_numbers_after_kill_9;
mod events_keep_their_numbers_when_the_clock_steps_back;
mod every_release_continues_after_clean;
mod every_release_is_pruned_or_refused_plainly;
mod fence_refusals_leave_database_unchanged;
mod history_pages_without_skip_or_repeat;
mod history_search_and_scope;
mod history_walks_session_by_session;
mod http_answers_match_the_cli;
mod http_answers_match_their_openapi_schemas;
mod http_auth_requires_the_password;
mod http_idle_and_slow_connections_are_closed;
mod http_refusals_change_nothing;
mod http_routes_match_openapi;
mod http_shutdown_is_graceful;
mod journal_binds_to_one_database;
mod journal_keeps_refusals_thirty_days;
mod large_message_prunes_in_one_transaction;
mod layouts_are_pruned_or_refused_in_words;
mod opencode_continues_after_clean_and_vacuum;
mod opencode_continues_after_prune;
mod planned_prunes_write_what_unplanned_ones_write;
mod planner_refusals_leave_database_unchanged;
mod prune_batch_results_per_candidate;
mod prune_many_commits_a_batch_with_group_commit;
mod prune_removes_every_row_copy;
mod prunes_see_what_opencode_wrote_since_the_last_one;
mod read_commands_make_no_sync_calls;
mod read_commands_work_on_read_only_media;
mod recovery_resolves_pending_intents;
mod retry_returns_same_receipt;
mod scope_paths_follow_the_platform_of_the_path;
mod sse_lagging_subscriber_is_caught_up;
mod sse_resumes_across_server_restarts;
mod sse_subscribers_replay_what_they_missed;
mod subscribers_replay_missed_then_live;
mod v2_messages_preview_read_only;
mod v2_prunes_keep_everything_else;
mod v2_store_prunes_with_compare_and_swap;
mod vacuum_checks_room_and_other_processes;
