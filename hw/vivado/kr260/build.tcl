# Build the KR260 overlay: overlays/kr260/kv.bit and kv.hwh (what pynq.Overlay loads).
#
#   vivado -mode batch -source kr260/build.tcl -tclargs CONFIG.tcl
#
# Run after package_ip.tcl with the same CONFIG.tcl (hw/vivado/flow.py overlay kr260 runs both).
# Project under $cfg(build_dir)/kv_kr260; the block design is kr260/bd.tcl, the pins
# kr260/kv_kr260.xdc. The bitstream and the hardware handoff are copied to overlays/kr260/ under
# one base name, as PYNQ expects (kv.bit next to kv.hwh).

source [lindex $argv 0]
set here [file dirname [file normalize [info script]]]

set proj_dir [file join $cfg(build_dir) kv_kr260]
create_project -force kv_kr260 $proj_dir -part $cfg(part)
set_property board_part $cfg(board_part) [current_project]
set_property board_connections $cfg(board_connections) [current_project]
set_property target_language Verilog [current_project]
set_property ip_repo_paths [list $cfg(ip_dir)] [current_project]
update_ip_catalog

source [file join $here bd.tcl]

set bd_file [get_files kv.bd]
generate_target all $bd_file
set wrapper [make_wrapper -files $bd_file -top]
add_files -norecurse $wrapper
set_property top kv_wrapper [current_fileset]
add_files -fileset constrs_1 -norecurse [file join $here kv_kr260.xdc]
update_compile_order -fileset sources_1

launch_runs impl_1 -to_step write_bitstream -jobs 2
wait_on_run impl_1
if {[get_property PROGRESS [get_runs impl_1]] ne "100%"} {
    error "implementation did not finish: [get_property STATUS [get_runs impl_1]] (see $proj_dir)"
}

# Vivado 2020.2+ keeps the hardware handoff under <project>.gen/sources_1/bd/<design>/hw_handoff
set run_dir [get_property DIRECTORY [get_runs impl_1]]
file mkdir $cfg(overlay_dir)
file copy -force [file join $run_dir kv_wrapper.bit] [file join $cfg(overlay_dir) kv.bit]
file copy -force [file join $proj_dir kv_kr260.gen sources_1 bd kv hw_handoff kv.hwh] \
    [file join $cfg(overlay_dir) kv.hwh]
puts "wrote [file join $cfg(overlay_dir) kv.bit] and kv.hwh"
