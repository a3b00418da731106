// A local HTTP receiver for `notify`'s webhook: it answers 200 to every POST and records it
// with the `X-Soak-Op` header the soak gives each bullsweep invocation's policy file, so every
// notice is tied to the command (or daemon) that sent it, whatever the timing.
'use strict';
const http = require('node:http');

const TAG_HEADER = 'x-soak-op';

class Webhook {
  constructor() {
    this.posts = [];
    this.server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        let json = null;
        try { json = JSON.parse(body); } catch { /* kept as text */ }
        this.posts.push({ at: Date.now(), method: req.method, tag: req.headers[TAG_HEADER] || null, body: json || body });
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok');
      });
    });
  }

  // Listens on a free loopback port; resolves the URL to POST to.
  async start() {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}/hook`;
    return this.url;
  }

  // The posts that carry `tag`.
  postsOf(tag) { return this.posts.filter((p) => p.tag === tag); }

  close() {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(resolve));
  }
}

module.exports = { Webhook, TAG_HEADER };
