//! What tern's PNG programs share (feature `plot`): the font their text is
//! drawn with, the legend box and a line with its points. The programs are the `join` bench,
//! `advisor-plot` (tern-advisor) and `timeline-plot` (tern-testkit).

use plotters::coord::CoordTranslate;
use plotters::prelude::*;

/// The font used when `TERN_PLOT_FONT` names none.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Registers the font file `TERN_PLOT_FONT` (by default [`DEFAULT_FONT`]) as
/// "sans-serif": ab_glyph draws text with a font given as bytes, so no system
/// font library is needed. The bytes are kept for the rest of the process.
///
/// # Errors
/// The file cannot be read, or is not a font.
pub fn register_font() -> Result<(), String> {
    let font = std::env::var("TERN_PLOT_FONT").unwrap_or_else(|_| DEFAULT_FONT.to_owned());
    let bytes = std::fs::read(&font)
        .map_err(|e| format!("the plot's font {font} (set TERN_PLOT_FONT): {e}"))?;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| format!("{font} is not a font"))
}

/// Draws the legend of `chart` (the series given a label) at `position`, on
/// a translucent white box with a black border.
///
/// # Errors
/// The drawing backend's error, as text.
pub fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(|e| format!("the legend: {e}"))
}

/// Draws `data` as a line of `colour` with a dot of `radius` pixels at each
/// point; a `label` gives the line its entry in the legend.
///
/// # Errors
/// The drawing backend's error, as text.
pub fn draw_line<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    data: &[(f64, f64)],
    colour: RGBColor,
    radius: i32,
    label: Option<&str>,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let line = chart
        .draw_series(LineSeries::new(
            data.iter().copied(),
            colour.stroke_width(2),
        ))
        .map_err(|e| format!("a line: {e}"))?;
    if let Some(label) = label {
        line.label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .draw_series(
            data.iter()
                .map(|&(x, y)| Circle::new((x, y), radius, colour.filled())),
        )
        .map_err(|e| format!("a line's points: {e}"))?;
    Ok(())
}
