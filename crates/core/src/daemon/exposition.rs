//! A stable order for `/metrics`: the registry keeps each family's series in a hash map, so
//! their order changed from one scrape to the next. Within each family the series are put in
//! the order of their labels; a series' own samples (a histogram's buckets, `_sum` and
//! `_count`) keep their order and stay together.

use std::collections::BTreeMap;

/// `text` (the OpenMetrics exposition) with each family's series sorted by their labels.
pub fn sorted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // The current family's samples, by their labels without `le`, in the order written.
    let mut series: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let flush = |series: &mut BTreeMap<String, Vec<&str>>, out: &mut String| {
        for line in std::mem::take(series).into_values().flatten() {
            out.push_str(line);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut series, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            series.entry(series_key(line)).or_default().push(line);
        }
    }
    flush(&mut series, &mut out);
    out
}

/// A sample's labels, `le` left out (so a histogram's lines share one key), as written.
fn series_key(line: &str) -> String {
    let Some(open) = line.find('{') else {
        return String::new();
    };
    let mut labels = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut escaped) = (false, false);
    for c in line[open + 1..].chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => break,
            ',' if !quoted => {
                labels.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    labels.push(current);
    labels.retain(|l| !l.starts_with("le="));
    labels.join(",")
}

#[cfg(test)]
mod tests {
    use super::sorted;

    #[test]
    fn series_are_sorted_by_labels_and_histograms_stay_whole() {
        let text = "# TYPE q gauge\nq{queue=\"{b}:z\"} 1\nq{queue=\"{b}:a,}\"} 2\n\
                    # TYPE h histogram\nh_bucket{queue=\"b\",le=\"0.1\"} 1\nh_bucket{queue=\"b\",le=\"+Inf\"} 1\nh_sum{queue=\"b\"} 0.1\nh_count{queue=\"b\"} 1\n\
                    h_bucket{queue=\"a\",le=\"0.1\"} 0\nh_bucket{queue=\"a\",le=\"+Inf\"} 2\nh_sum{queue=\"a\"} 3\nh_count{queue=\"a\"} 2\n# EOF\n";
        assert_eq!(
            sorted(text),
            "# TYPE q gauge\nq{queue=\"{b}:a,}\"} 2\nq{queue=\"{b}:z\"} 1\n\
             # TYPE h histogram\nh_bucket{queue=\"a\",le=\"0.1\"} 0\nh_bucket{queue=\"a\",le=\"+Inf\"} 2\nh_sum{queue=\"a\"} 3\nh_count{queue=\"a\"} 2\n\
             h_bucket{queue=\"b\",le=\"0.1\"} 1\nh_bucket{queue=\"b\",le=\"+Inf\"} 1\nh_sum{queue=\"b\"} 0.1\nh_count{queue=\"b\"} 1\n# EOF\n"
        );
    }
}
