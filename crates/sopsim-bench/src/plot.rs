//! The report's plots, each as SVG and PNG: the distribution of a figure per mode (one
//! dot per run, the mean with its 95% interval), a per-round series per mode (the mean
//! each round with its 95% interval over the runs) and the mean prompt tokens per turn
//! over the run. Text is set in the embedded DejaVu Sans, so PNGs need no system fonts.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::stats::Summary;
use sopsim::scenario::Mode;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A plot that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("drawing {path}")]
pub struct PlotError {
    /// The file being drawn, SVG or PNG.
    pub path: PathBuf,
    /// Why it could not be drawn or written.
    #[source]
    pub source: BoxError,
}

const SIZE: (u32, u32) = (720, 420);
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // Registration only fails on a malformed font; the embedded one is well formed,
        // and text would then fall back to nothing rather than fail the report.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// One mode's values of a figure and their summary.
pub struct Series<'a> {
    /// The mode.
    pub mode: Mode,
    /// The figure's value in each run that has one.
    pub values: Vec<f64>,
    /// The values' summary (mean and 95% interval), where there is one.
    pub summary: Option<&'a Summary>,
}

/// Draws the same picture as `{stem}.svg` and `{stem}.png`.
macro_rules! svg_and_png {
    ($stem:expr, $draw:ident ( $($arg:expr),* )) => {{
        register_font();
        let svg = $stem.with_extension("svg");
        let png = $stem.with_extension("png");
        {
            let area = SVGBackend::new(&svg, SIZE).into_drawing_area();
            $draw(&area, $($arg),*).map_err(|source| PlotError { path: svg.clone(), source })?;
        }
        let mut rgb = vec![0; SIZE.0 as usize * SIZE.1 as usize * 3];
        {
            let area = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
            $draw(&area, $($arg),*).map_err(|source| PlotError { path: png.clone(), source })?;
        }
        write_png(&png, &rgb).map_err(|source| PlotError { path: png.clone(), source })
    }};
}

/// Writes a picture of [`SIZE`], 8-bit RGB rows from the top, as a PNG file.
fn write_png(path: &Path, rgb: &[u8]) -> Result<(), BoxError> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, SIZE.0, SIZE.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(())
}

fn err<E: std::error::Error + Send + Sync + 'static>(e: E) -> BoxError {
    Box::new(e)
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.1).max(if hi == lo {
        hi.abs().max(1.0) * 0.1
    } else {
        0.0
    });
    (lo - pad, hi + pad)
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A white chart with `title` over `x` and `y`, its axes' label areas set.
fn frame<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, DB>, BoxError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(err)
}

/// The legend of a chart's labelled series.
fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>) -> Result<(), BoxError>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// A strip chart of `figure` per mode.
pub fn distribution(
    stem: &Path,
    title: &str,
    figure: &str,
    series: &[Series],
) -> Result<(), PlotError> {
    let all = series.iter().flat_map(|s| {
        s.values
            .iter()
            .copied()
            .chain(s.summary.and_then(|m| m.ci95).into_iter().flatten())
    });
    let (lo, hi) = bounds(all);
    svg_and_png!(stem, draw_distribution(title, figure, series, lo, hi))
}

fn draw_distribution<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    figure: &str,
    series: &[Series],
    lo: f64,
    hi: f64,
) -> Result<(), BoxError>
where
    DB::ErrorType: 'static,
{
    let n = series.len();
    {
        let mut chart = frame(root, title, -0.5f64..(n as f64 - 0.5), lo..hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round() as usize;
                if (x - i as f64).abs() < 0.01 && i < n {
                    series[i].mode.as_str().to_string()
                } else {
                    String::new()
                }
            })
            .y_desc(figure)
            .draw()
            .map_err(err)?;
        for (i, s) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let count = s.values.len().max(1) as f64;
            // Spread the dots sideways by their index so equal values stay visible.
            let dots = s.values.iter().enumerate().map(|(k, v)| {
                let offset = ((k as f64 + 0.5) / count - 0.5) * 0.4;
                Circle::new((i as f64 + offset, *v), 4, colour.mix(0.6).filled())
            });
            chart.draw_series(dots).map_err(err)?;
            if let Some(m) = s.summary {
                let [a, b] = m.ci95.unwrap_or([m.mean, m.mean]);
                chart
                    .draw_series(std::iter::once(ErrorBar::new_vertical(
                        i as f64 + 0.3,
                        a,
                        m.mean,
                        b,
                        BLACK.stroke_width(2),
                        12,
                    )))
                    .map_err(err)?;
            }
        }
    }
    root.present().map_err(err)
}

/// Mean prompt tokens per turn, one line per mode.
pub fn tokens_per_turn(
    stem: &Path,
    title: &str,
    series: &[(Mode, Vec<f64>)],
) -> Result<(), PlotError> {
    let turns = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let (_, hi) = bounds(series.iter().flat_map(|(_, v)| v.iter().copied()));
    svg_and_png!(stem, draw_tokens(title, series, turns, hi))
}

fn draw_tokens<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[(Mode, Vec<f64>)],
    turns: usize,
    hi: f64,
) -> Result<(), BoxError>
where
    DB::ErrorType: 'static,
{
    {
        let mut chart = frame(root, title, 1f64..turns as f64, 0f64..hi.max(1.0))?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc("turn")
            .y_desc("prompt tokens (mean over runs)")
            .draw()
            .map_err(err)?;
        for (i, (mode, values)) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(
                    values.iter().enumerate().map(|(t, v)| (t as f64 + 1.0, *v)),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(mode.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        legend(&mut chart)?;
    }
    root.present().map_err(err)
}

/// A per-round series (e.g. a choice's share), one line per mode with each round's 95%
/// interval over the runs, and people's means of it (from round 1) as a black line of
/// points where there are people's data.
pub fn by_round(
    stem: &Path,
    title: &str,
    name: &str,
    series: &[(Mode, Vec<Option<Summary>>)],
    people: &[f64],
) -> Result<(), PlotError> {
    let rounds = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let rounds = rounds.max(people.len());
    let all = series.iter().flat_map(|(_, v)| {
        v.iter()
            .flatten()
            .flat_map(|s| std::iter::once(s.mean).chain(s.ci95.into_iter().flatten()))
    });
    let range = bounds(all.chain(people.iter().copied()));
    svg_and_png!(
        stem,
        draw_rounds(title, name, series, people, rounds, range)
    )
}

fn draw_rounds<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    name: &str,
    series: &[(Mode, Vec<Option<Summary>>)],
    people: &[f64],
    rounds: usize,
    (lo, hi): (f64, f64),
) -> Result<(), BoxError>
where
    DB::ErrorType: 'static,
{
    {
        let mut chart = frame(root, title, 0.5f64..rounds as f64 + 0.5, lo..hi)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_labels(rounds.min(20))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc("round")
            .y_desc(format!("{name} (mean over runs, 95% CI)"))
            .draw()
            .map_err(err)?;
        let n = series.len().max(1) as f64;
        for (i, (mode, values)) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            // Modes side by side within a round, so their intervals do not overlap.
            let shift = (i as f64 - (n - 1.0) / 2.0) * 0.08;
            let points: Vec<(f64, &Summary)> = values
                .iter()
                .enumerate()
                .filter_map(|(r, s)| Some((r as f64 + 1.0 + shift, s.as_ref()?)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|(x, s)| (*x, s.mean)),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(mode.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|(x, s)| {
                    let [a, b] = s.ci95.unwrap_or([s.mean, s.mean]);
                    ErrorBar::new_vertical(*x, a, s.mean, b, colour.stroke_width(1), 8)
                }))
                .map_err(err)?;
        }
        if !people.is_empty() {
            let points: Vec<(f64, f64)> = people
                .iter()
                .enumerate()
                .map(|(r, v)| (r as f64 + 1.0, *v))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    BLACK.stroke_width(1),
                ))
                .map_err(err)?
                .label("people")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(1))
                });
            chart
                .draw_series(points.iter().map(|p| Circle::new(*p, 3, BLACK.filled())))
                .map_err(err)?;
        }
        legend(&mut chart)?;
    }
    root.present().map_err(err)
}

/// A tournament's payoff matrix as a heat map: each cell the row player's mean payoff
/// against the column player, darker for more, its value written in it.
pub fn payoff_matrix(
    stem: &Path,
    players: &[String],
    matrix: &[Vec<Option<f64>>],
) -> Result<(), PlotError> {
    svg_and_png!(stem, draw_matrix(players, matrix))
}

fn draw_matrix<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    players: &[String],
    matrix: &[Vec<Option<f64>>],
) -> Result<(), BoxError>
where
    DB::ErrorType: 'static,
{
    let n = players.len().max(1) as f64;
    let (lo, hi) = bounds(matrix.iter().flatten().flatten().copied());
    // Cells centred on whole numbers, so each label sits under its cell.
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "Mean payoff per round, row against column",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(130)
        .build_cartesian_2d(-0.5..n - 0.5, -0.5..n - 0.5)
        .map_err(err)?;
    let name = |i: f64, flip: bool| {
        let at = i.round() as isize;
        let at = if flip {
            players.len() as isize - 1 - at
        } else {
            at
        };
        usize::try_from(at)
            .ok()
            .and_then(|k| players.get(k))
            .filter(|_| (i - i.round()).abs() < 1e-6)
            .cloned()
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(players.len() * 2 + 1)
        .y_labels(players.len() * 2 + 1)
        .x_label_formatter(&|x| name(*x, false))
        .y_label_formatter(&|y| name(*y, true))
        .draw()
        .map_err(err)?;
    for (i, row) in matrix.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let (x, y) = (j as f64, n - 1.0 - i as f64);
            let shade = v.map_or(1.0, |v| 1.0 - 0.8 * (v - lo) / (hi - lo).max(1e-9));
            let colour = RGBColor(
                (31.0 + (255.0 - 31.0) * shade) as u8,
                (119.0 + (255.0 - 119.0) * shade) as u8,
                (180.0 + (255.0 - 180.0) * shade) as u8,
            );
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)],
                    colour.filled(),
                )))
                .map_err(err)?;
            let text = v.map_or("-".to_string(), |v| format!("{v:.2}"));
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x - 0.15, y + 0.05),
                    ("sans-serif", 14).into_font(),
                )))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// A tournament's ranking: each player's mean payoff per round with its 95% interval,
/// best at the top.
pub fn ranking(
    stem: &Path,
    ranked: &[(String, Option<super::tournament::ratings::Estimate>)],
) -> Result<(), PlotError> {
    svg_and_png!(stem, draw_ranking(ranked))
}

fn draw_ranking<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ranked: &[(String, Option<super::tournament::ratings::Estimate>)],
) -> Result<(), BoxError>
where
    DB::ErrorType: 'static,
{
    let values = ranked.iter().filter_map(|(_, e)| *e).flat_map(|e| {
        let [lo, hi] = e.ci95.unwrap_or([e.value, e.value]);
        [e.value, lo, hi]
    });
    let (lo, hi) = bounds(values);
    let n = ranked.len().max(1) as f64;
    // Rows centred on whole numbers, so each label sits beside its row.
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "Ranking: mean payoff per round (95% interval)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(130)
        .build_cartesian_2d(lo..hi, -0.5..n - 0.5)
        .map_err(err)?;
    let name = |y: f64| {
        let at = ranked.len() as isize - 1 - y.round() as isize;
        usize::try_from(at)
            .ok()
            .and_then(|k| ranked.get(k))
            .filter(|_| (y - y.round()).abs() < 1e-6)
            .map(|(p, _)| p.clone())
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(ranked.len() * 2 + 1)
        .y_label_formatter(&|y| name(*y))
        .draw()
        .map_err(err)?;
    for (i, (_, e)) in ranked.iter().enumerate() {
        let Some(e) = e else { continue };
        let y = n - 1.0 - i as f64;
        let [a, b] = e.ci95.unwrap_or([e.value, e.value]);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(a, y), (b, y)],
                COLOURS[0].stroke_width(2),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Circle::new(
                (e.value, y),
                5,
                COLOURS[0].filled(),
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
