//! The page as served (its behaviour in a browser is in `browser.rs`).

use super::support::*;

#[tokio::test]
async fn the_page_names_every_event_type_for_its_live_listeners() {
    let h = start(false).await;
    let html = h
        .http
        .get(h.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let kinds = html
        .split("<meta name=\"event-kinds\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no event-kinds meta tag in\n{html}"));
    let kinds: Vec<&str> = kinds.split(' ').collect();
    assert_eq!(kinds, gaffer_core::Event::KINDS);
    // Types added after the page was first written (a listener missing for them
    // would drop them silently).
    for late in ["task_leased", "ci_status_changed"] {
        assert!(kinds.contains(&late), "{late} missing from {kinds:?}");
    }
}

#[tokio::test]
async fn assets_are_served_with_their_types_and_revalidated_by_etag() {
    let h = start(false).await;
    for (path, content_type) in [
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        (
            "/assets/vendor/preact.mjs",
            "text/javascript; charset=utf-8",
        ),
        ("/assets/manifest.webmanifest", "application/manifest+json"),
        ("/assets/icons/icon-192.png", "image/png"),
        ("/favicon.ico", "image/x-icon"),
    ] {
        // No credential needed: the login page uses them too.
        let r = h.anonymous.get(h.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], content_type, "{path}");
        let etag = r.headers()["etag"].clone();
        let again = h
            .anonymous
            .get(h.url(path))
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
    }
    // The service worker may serve every page, though it lives under /assets/.
    let sw = h
        .anonymous
        .get(h.url("/assets/sw.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(sw.headers()["service-worker-allowed"], "/");
    let missing = h
        .anonymous
        .get(h.url("/assets/nothing.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // (Assets are a fixed table compiled in, not files looked up by name.)
}

/// The vendored library is what `scripts/vendor-web` copied from npm: its digests
/// are recorded next to it, so an edit by hand (or a tampered copy) fails here.
#[test]
fn the_vendored_files_match_their_recorded_digests() {
    use sha2::{Digest, Sha256};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vendor");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut checked = 0;
    for line in readme.lines().filter(|l| l.contains(".mjs |")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (file, digest) = (cells[1], cells[4]);
        let actual = hex::encode(Sha256::digest(std::fs::read(dir.join(file)).unwrap()));
        assert_eq!(
            actual, digest,
            "{file} differs from what scripts/vendor-web recorded"
        );
        checked += 1;
    }
    assert_eq!(checked, 3);
}
