//! A private S3-compatible server for the archive tests: `moto_server` (PyPI `moto[server]`) on
//! a free loopback port, killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivateS3 {
    child: Child,
    pub port: u16,
}

impl PrivateS3 {
    pub fn start() -> Self {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            let mut child = Command::new("moto_server")
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("moto_server starts (pip install 'moto[server]')");
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return PrivateS3 { child, port };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("moto_server did not start on a free port");
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (moto does not check signatures).
    pub fn create_bucket(&self, bucket: &str) {
        ureq::put(&format!("{}/{bucket}", self.endpoint()))
            .send_empty()
            .expect("create bucket");
    }

    /// Object keys in a bucket.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let body = ureq::get(&format!("{}/{bucket}?list-type=2", self.endpoint()))
            .call()
            .expect("list bucket")
            .into_body()
            .read_to_string()
            .expect("body");
        body.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next().map(str::to_string))
            .collect()
    }

    /// The environment bullsweep reads its S3 settings from.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ]
    }
}

impl Drop for PrivateS3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
