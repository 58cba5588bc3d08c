// Plots through gnuplot (Debian gnuplot-nox): chosen because it is packaged, scriptable, writes
// both PNG (pngcairo) and SVG from one script and needs no Python stack. The data is written
// beside the images as CSV so a figure can be redrawn with any other tool.
#pragma once

#include <string>

namespace inc::sim {

// Path of the gnuplot executable ($GNUPLOT or gnuplot in PATH), or "" if none is found.
std::string find_gnuplot();

// Renders `body` (gnuplot commands after the terminal/output lines) twice: `stem`.png and
// `stem`.svg. Throws inc::Error(config) with a clear message if gnuplot is missing or fails.
void render_plot(const std::string& stem, const std::string& body, int width = 900, int height = 560);

}  // namespace inc::sim
